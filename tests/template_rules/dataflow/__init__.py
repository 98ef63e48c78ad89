"""What the optional-reads rule walks a definition with: JSONPaths, and the types of the values a state's
input may hold (botocore output shapes, records the definition built, opaque JSON) with the facts known there."""
