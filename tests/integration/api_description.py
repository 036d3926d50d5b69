"""The API description (docs/openapi.yaml) as the integration tests' client checks it: every answer
to a request the client sent through `Conn.send_request` must be an answer the description lists
for that route, method and status, and a JSON answer must match the schema described for it.

- A route is the request's path (query left out) matched against the description's paths: the
  most literal path first, `{key}` taking the rest of the path (keys may hold `/`), `{app}` one
  segment not starting with `_`, `{endpoint}` whatever follows `/_`, every other `{name}` one
  segment. `OPTIONS *` and targets that are not origin-form (no leading `/`)
  are the HTTP layer's, not a route's: not checked.
- A method the path does not list must be answered 405 (with `Allow`), 501 (a method HTTP does not
  define) or 400 (a malformed request), each with an error body: the description's rule for the
  methods it leaves out (info.description).
- A status the operation does not list fails; so does a JSON body where the description has none,
  or one its schema refuses (jsonschema, Draft 2020-12, the description's components in reach of
  its `$ref`s).
- `PERCORE_API_COVERAGE=FILE`: each checked (path, method, status) is appended to FILE, so a run
  can say which of the described answers the tests exercised.

Debian's python3-yaml and python3-jsonschema (.ci/deps installs them); missing, the client fails
every request it checks, it does not skip.
"""
from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DESCRIPTION = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "openapi.yaml")
UNLISTED_METHOD_STATUSES = (400, 405, 501)
METHODS = ("get", "head", "put", "post", "delete", "options", "patch", "trace")


class ApiMismatch(AssertionError):
    """An answer the API description does not allow."""


class Description:
    def __init__(self, path: str = DESCRIPTION):
        import yaml  # Debian's python3-yaml
        with open(path) as f:
            self.doc = yaml.safe_load(f)
        self.routes = []   # (literal chars, regex, template)
        for template, item in self.doc["paths"].items():
            for spelling in [template, *item.get("x-also", [])]:
                self._add_route(spelling, template)
        self.routes.sort(key=lambda r: -r[0])   # the most literal first: /_changes/_all before /_changes/{app}
        self.validators = {}

    def _add_route(self, spelling: str, template: str):
        pattern = ""
        for part in re.split(r"(\{[^}]+\})", spelling):
            if part == "{key}":
                pattern += r".+"
            elif part == "{endpoint}":    # /_{endpoint}: whatever under `_` no other path names
                pattern += r".*"
            elif part == "{app}":         # an app never starts with `_` (the server's names do)
                pattern += r"(?!_)[^/]+"
            elif part.startswith("{"):
                pattern += r"[^/]+"
            else:
                pattern += re.escape(part)
        literal = len(re.sub(r"\{[^}]+\}", "", spelling))
        self.routes.append((literal, re.compile(pattern + r"\Z"), template))

    def route(self, target: str) -> str | None:
        path = target.split("?", 1)[0]
        for _, regex, template in self.routes:
            if regex.match(path):
                return template
        return None

    def check(self, method: str, target: str, status: int, content_type: str | None, body: bytes) -> tuple | None:
        """Raises ApiMismatch when the answer is not one the description allows; returns the
        (path, method, status) it checked, or None for a target that is not a route."""
        if not target.startswith("/"):
            return None
        template = self.route(target)
        if template is None:
            raise ApiMismatch(f"the API description has no path for {method} {target} (answered {status})")
        item = self.doc["paths"][template]
        op = item.get(method.lower())
        if op is None:
            if status not in UNLISTED_METHOD_STATUSES:
                raise ApiMismatch(f"{method} {target}: the description lists no {method} on {template}, "
                                  f"and {status} is not one of {UNLISTED_METHOD_STATUSES}")
            if method.upper() != "HEAD" and body:
                self._check_json(("error",), method, target, status, content_type, body,
                                 {"$ref": "#/components/schemas/Error"})
            return (template, method.upper(), status)
        described = op.get("responses", {}).get(str(status))
        if described is None:
            raise ApiMismatch(f"{method} {target} answered {status}, which the description of "
                              f"{method.upper()} {template} does not list: {body[:200]!r}")
        described = self._resolve(described)
        if method.upper() != "HEAD" and body:
            media = (content_type or "").split(";", 1)[0].strip().lower()
            content = described.get("content") or {}
            if media == "application/json" and "*/*" not in content:   # a document's value is opaque
                if "application/json" not in content:
                    raise ApiMismatch(f"{method} {target} answered {status} with a JSON body, which the description "
                                      f"of {method.upper()} {template} does not list: {body[:200]!r}")
                self._check_json((template, method, status), method, target, status, content_type, body,
                                 content["application/json"].get("schema", {}))
        return (template, method.upper(), status)

    def _resolve(self, node: dict) -> dict:
        while "$ref" in node:
            parts = node["$ref"].lstrip("#/").split("/")
            node = self.doc
            for p in parts:
                node = node[p]
        return node

    def _check_json(self, cache_key, method, target, status, content_type, body, schema):
        import jsonschema  # Debian's python3-jsonschema
        try:
            value = json.loads(body.decode("utf-8"))
        except ValueError as e:
            raise ApiMismatch(f"{method} {target} answered {status} with a body that is not JSON ({e}): {body[:200]!r}")
        validator = self.validators.get(cache_key)
        if validator is None:
            # the description's components beside the schema, so that its #/components/… refs resolve
            validator = jsonschema.Draft202012Validator(dict(schema, components=self.doc["components"]))
            self.validators[cache_key] = validator
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "(the body)"
            raise ApiMismatch(f"{method} {target} answered {status}: {where}: {errors[0].message}; body {body[:300]!r}")


_description: Description | None = None


def check_answer(method: str, target: str, status: int, content_type: str | None, body: bytes) -> None:
    """The client's hook (percore_client.Conn): raises ApiMismatch on an answer the description does
    not allow; notes what it checked in PERCORE_API_COVERAGE's file when set."""
    global _description
    if _description is None:
        _description = Description()
    checked = _description.check(method, target, status, content_type, body)
    coverage = os.environ.get("PERCORE_API_COVERAGE")
    if checked and coverage:
        with open(coverage, "a") as f:
            f.write(json.dumps(checked) + "\n")


def described_answers(doc: dict) -> set:
    """Every (path, METHOD, status) the description lists."""
    out = set()
    for path, item in doc["paths"].items():
        for method in METHODS:
            for status in (item.get(method) or {}).get("responses", {}):
                out.add((path, method.upper(), int(status)))
    return out


def main(argv: list[str]) -> int:
    """api_description.py --coverage FILE: what of the description the checked answers (FILE,
    written under PERCORE_API_COVERAGE) exercised: the routes (path and method), each route's own
    answers, and the refusals every operation merges (x-refusals), by status."""
    if len(argv) != 2 or argv[0] != "--coverage":
        print("usage: api_description.py --coverage FILE", file=sys.stderr)
        return 2
    doc = Description().doc
    described = described_answers(doc)
    with open(argv[1]) as f:
        seen = {tuple(json.loads(line)) for line in f if line.strip()}
    routes = {(p, m) for p, m, _ in described}
    shared = {int(s) for s in doc["x-refusals"]}
    own = {a for a in described if a[2] not in shared}
    hit_routes = {(p, m) for p, m, _ in described & seen}
    hit_shared = {s for _, _, s in seen if s in shared}
    print(f"routes (path and method): {len(routes)} described, {len(hit_routes)} exercised")
    print(f"their own answers (path, method and status): {len(own)} described, {len(own & seen)} exercised")
    print(f"refusals every route lists: {len(shared)} statuses {sorted(shared)}, "
          f"{len(hit_shared)} exercised on some route {sorted(hit_shared)}")
    for p, m in sorted(routes - hit_routes):
        print(f"  route not exercised: {m} {p}")
    for p, m, s in sorted(own - seen):
        print(f"  answer not exercised: {m} {p} {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
