"""Import-only IPython stand-in for qla-serve's SGLang adapter test on the H200 (the image has no
IPython; ``sglang.utils`` imports ``IPython.display`` at import time for notebook helpers)."""
