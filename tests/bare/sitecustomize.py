"""Started with this folder on ``PYTHONPATH``, Python cannot import the packages named in
``COMPSCOPE_TEST_HIDE`` (comma-separated): a ``None`` in ``sys.modules`` makes ``import`` fail and
``importlib.util.find_spec`` answer None, as where they are not installed
(tests/test_bare_install.py)."""

import os
import sys

for _name in filter(None, os.environ.get("COMPSCOPE_TEST_HIDE", "").split(",")):
    sys.modules[_name] = None
