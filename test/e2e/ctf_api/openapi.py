"""openapi.py - the routes that need no token: GET /api/openapi.json (served
verbatim, OpenAPI 3.1, every route, schema and parameter), 405 with Allow on
every route, and the participant page's files.
"""
from .common import (ADMIN, DOC, DOC_BYTES, call, check, expect, log, ok)


ALL_PATHS = {
    "/api/v1/whoami": {"get"},
    "/api/v1/challenges": {"get"},
    "/api/v1/teams/{team}/instances": {"get"},
    "/api/v1/teams/{team}/instances/{challenge}": {"get", "put", "delete"},
    "/api/v1/teams/{team}/instances/{challenge}/renew": {"post"},
    "/api/v1/teams/{team}/instances/{challenge}/flag": {"post"},
    "/api/v1/teams/{team}/events": {"get"},
    "/api/v1/admin/instances": {"get"},
    "/api/v1/admin/events": {"get"},
    "/api/v1/admin/summary": {"get"},
    "/api/v1/admin/teams/{team}/instances": {"delete"},
    "/api/v1/admin/teams/{team}/instances/{challenge}": {"delete"},
    "/api/v1/admin/teams/{team}/instances/{challenge}/renew": {"post"},
    "/api/v1/admin/challenges/{challenge}/instances": {"delete"},
    "/api/openapi.json": {"get"},
    "/": {"get"},
    "/app.js": {"get"},
    "/style.css": {"get"},
}


def fill(tmpl, team="team-a", challenge="web"):
    return tmpl.replace("{team}", team).replace("{challenge}", challenge)


def test_openapi():
    log("the OpenAPI document")
    r = call("GET", "/api/openapi.json")
    expect(r, 200, what="GET /api/openapi.json without a token")
    check(r.raw == DOC_BYTES, "served /api/openapi.json differs from operators/ctf/web/openapi.json")
    check(str(DOC.get("openapi", "")).startswith("3.1"), f"openapi version {DOC.get('openapi')}")
    have = {p: {m for m in item if m in ("get", "put", "post", "delete", "patch", "head", "options")}
            for p, item in DOC["paths"].items()}
    check(have == ALL_PATHS, f"paths of the document: {have}, want {ALL_PATHS}")
    schemas = DOC["components"]["schemas"]
    for s in ("Challenge", "Instance", "InstanceList", "Error", "Whoami", "PutBody"):
        check(s in schemas, f"schema {s} missing")
    check(schemas["PutBody"].get("additionalProperties") is False, "PutBody allows unknown fields")
    params = DOC["components"]["parameters"]
    check(params["team"]["schema"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
          and params["team"]["schema"]["maxLength"] == 63, "team parameter")
    check(params["challenge"]["schema"]["maxLength"] == 253, "challenge parameter")
    sec = DOC["components"]["securitySchemes"]
    check(any(v.get("scheme") == "bearer" for v in sec.values()), "no bearer security scheme")
    ok("GET /api/openapi.json: no token needed, the file verbatim, OpenAPI 3.1, every route, schema and parameter")

    # Every method of every path the API serves is in the document, and no other:
    # a method the document does not list is 405 with exactly those in Allow.
    for tmpl, methods in ALL_PATHS.items():
        path = fill(tmpl)
        r = call("PATCH", path, ADMIN)
        expect(r, 405, "MethodNotAllowed" if path.startswith("/api/") else None, f"PATCH {path}")
        allow = {m.strip().lower() for m in r.headers["allow"].split(",")} - {"head", "options"}
        check(allow == methods, f"PATCH {path}: Allow {r.headers['allow']!r}, the document has {sorted(methods)}")
    ok("405 with Allow on every route, and Allow lists exactly the document's methods")

    r = expect(call("GET", "/"), 200, what="GET /")
    check(r.headers.get("content-type", "").startswith("text/html") and r.raw, "GET / is not an HTML page")
    r = expect(call("GET", "/app.js"), 200, what="GET /app.js")
    check(r.raw, "empty /app.js")
    r = expect(call("GET", "/style.css"), 200, what="GET /style.css")
    check(r.raw, "empty /style.css")
    expect(call("GET", "/no-such-file.js"), 404, what="GET /no-such-file.js")
    ok("the page: / (text/html), /app.js, /style.css served without a token; an unknown file is 404")
