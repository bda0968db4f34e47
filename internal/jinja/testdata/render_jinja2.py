"""Renders chat templates with Python's Jinja2 as transformers' apply_chat_template does, for
internal/jinja's differential test. stdin: a JSON array of {template, vars}; stdout: a JSON array
of {out} or {error}, one per case."""
import datetime
import json
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise ValueError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
# strftime_now at a fixed date (26 July 2024), as the other renderers have it.
env.globals["strftime_now"] = lambda fmt: datetime.datetime(2024, 7, 26).strftime(fmt)

results = []
for case in json.load(sys.stdin):
    try:
        results.append({"out": env.from_string(case["template"]).render(**case["vars"])})
    except Exception as e:  # the template's failure is a result
        results.append({"error": f"{type(e).__name__}: {e}"})
json.dump(results, sys.stdout, ensure_ascii=False)
