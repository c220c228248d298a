"""The stack's custom-resource handler (lambdas/custom_resources/handler.py) as tests load it, and
a fake of the OpenSearch security plugin's REST API it talks to (no OpenSearch with the security
plugin runs on this machine)."""

from __future__ import annotations

import json
import runpy
from typing import Any

from tests.support.cdk import ADMIN, ROOT

# The handler's globals (a file of its own, not a package): access["apply"], access["publish"], ...
access: dict[str, Any] = runpy.run_path(str(ROOT / "lambdas" / "custom_resources" / "handler.py"))


class FakeSecurityApi:
    """The security plugin's REST API as a dict of documents (what a domain answers just after creation)."""

    def __init__(self) -> None:
        self.docs: dict[str, Any] = {
            "rolesmapping/all_access": {
                "all_access": {"backend_roles": ["arn:aws:iam::123456789012:role/master"], "hosts": [], "users": []}
            },
            "audit": {
                "_readonly": [],
                "config": {"enabled": False, "audit": {"enable_rest": True}, "compliance": {"enabled": True}},
            },
        }
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        self.calls.append((method, path))
        if method == "GET":
            if path not in self.docs and not missing_ok:
                raise RuntimeError(f"GET {path}: HTTP 404")
            return self.docs.get(path)
        if method == "PUT":
            name = path.split("/")[-1]
            self.docs[path] = {name: body} if path.startswith("rolesmapping/") else body
            if path == "audit/config":
                self.docs["audit"] = {"_readonly": [], "config": body}
            return {"status": "OK"}
        self.docs.pop(path, None)  # DELETE
        return {"status": "OK"}


PROPERTIES = {
    "Endpoint": "search-cdc.us-east-1.es.amazonaws.com",
    "RoleName": "cdc-writer",
    "Role": json.dumps(
        {"index_permissions": [{"index_patterns": ["orders", "orders-*"], "allowed_actions": ["crud", "manage"]}]}
    ),
    "Writer": "arn:aws:iam::123456789012:role/cdc-JobRole",
    "Admin": ADMIN,
}
