"""Image URIs read straight from the SageMaker SDK's JSON tables: the same URI the SDK's own
`image_uris.retrieve` gives, for every version and region of every family, without importing the SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

from optigate.serving import images


def test_every_image_uri_is_the_one_the_sdk_retrieves():
    from sagemaker.core import common_utils, image_uris

    # The SDK reloads botocore's endpoint data on every call (what made synth slow); once is enough here.
    original = common_utils._botocore_resolver
    common_utils._botocore_resolver = cache(original)
    try:
        compared = 0
        for family, framework in images.SDK_FRAMEWORK.items():
            for version in [*images.known_versions(family), "latest"]:
                for region in images.regions_for(family, version):
                    expected = image_uris.retrieve(framework, region=region, version=version)
                    assert images.image_uri(family, version, region) == expected, (family, version, region)
                    compared += 1
    finally:
        common_utils._botocore_resolver = original
    assert compared > 500  # every family, version and region (921 with SDK 3.27)


@pytest.mark.parametrize(
    ("region", "uri"),
    [
        ("us-east-1", "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"),
        ("cn-north-1", "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/djl-inference:0.36.0-lmi27.0.0-cu130"),
    ],
)
def test_an_image_uri_names_the_region_registry_and_tag(region, uri):
    assert images.image_uri("lmi", "0.36.0", region) == uri


def test_an_unknown_version_or_region_is_refused_with_what_exists():
    with pytest.raises(ValueError, match=r"no lmi image version '0\.1\.0'.*known: .*0\.36\.0"):
        images.image_uri("lmi", "0.1.0", "us-east-1")
    with pytest.raises(ValueError, match=r"no lmi 0\.36\.0 image in region 'xx-nowhere-1'.*us-east-1"):
        images.image_uri("lmi", "0.36.0", "xx-nowhere-1")


def test_a_table_the_direct_reader_does_not_understand_is_refused(monkeypatch, tmp_path):
    """A future table with per-processor or per-Python-version images must not be read as a flat one."""
    table = {"versions": {"9.9.9": {"processors": ["gpu"], "repository": "r", "tag_prefix": "t", "registries": {}}}}
    (tmp_path / "djl-lmi.json").write_text(json.dumps(table))
    monkeypatch.setattr(images, "_tables_folder", lambda: tmp_path)
    images._table.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"version 9\.9\.9 \['processors'\]"):
            images.known_versions("lmi")
    finally:
        images._table.cache_clear()


def test_resolving_an_image_does_not_import_the_sdk():
    code = (
        "import sys\n"
        "from optigate.serving import images\n"
        "images.image_uri('lmi', '0.36.0', 'us-east-1')\n"
        "print(sorted(m for m in sys.modules if m.startswith('sagemaker.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"
