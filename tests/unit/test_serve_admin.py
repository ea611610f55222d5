"""The local server's admin writes: a JSON content type always, the admin token when one is set."""

from __future__ import annotations

import httpx
import pytest
from starlette.testclient import TestClient

from knowwhen_runner.serve import default_registry, start_server_process
from knowwhen_runner.serve.admin_guard import ADMIN_TOKEN_ENV, admin_token_for
from knowwhen_runner.serve.app import create_app

RULE = [{"fault": "500", "count": 1}]
JSON = {"content-type": "application/json"}


def test_a_form_post_changes_nothing() -> None:
    """text/plain and form bodies (what another site's page can post) get 415 and leave the faults alone."""
    client = TestClient(create_app(registry=default_registry()))
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        for path in ("/admin/faults", "/admin/limits", "/admin/reset", "/admin/batches"):
            refused = client.post(path, content=b'[{"status": 500}]', headers={"content-type": kind})
            assert refused.status_code == 415, (path, kind)
            assert "Content-Type: application/json" in refused.json()["error"]["message"]
    assert client.get("/admin/faults").json() == []
    assert client.post("/admin/faults", json=RULE).status_code == 200
    assert client.get("/admin/faults").json()[0]["fault"] == "500"


def test_with_a_token_admin_writes_need_it() -> None:
    """With an admin token, writes without it or with a wrong one get 401; reads and model calls do not."""
    client = TestClient(create_app(registry=default_registry(), admin_token="s3cret-admin"))
    assert client.post("/admin/faults", json=RULE).status_code == 401
    assert (
        client.post("/admin/faults", json=RULE, headers={"X-Knowwhen-Admin-Token": "wrong"}).status_code
        == 401
    )
    assert client.delete("/admin/faults").status_code == 401
    assert client.get("/admin/faults").json() == []
    assert client.get("/health").status_code == 200
    ok = client.post("/admin/faults", json=RULE, headers={"X-Knowwhen-Admin-Token": "s3cret-admin"})
    assert ok.status_code == 200
    assert client.get("/admin/faults").json()[0]["fault"] == "500"


def test_beyond_loopback_a_token_is_generated_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback needs no token; any other address gets a fresh one and a sentence naming it; the env's wins."""
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    assert admin_token_for("127.0.0.1") == (None, None)
    assert admin_token_for("::1") == (None, None)
    token, said = admin_token_for("0.0.0.0")
    assert token and len(token) >= 24 and said and token in said and "X-Knowwhen-Admin-Token" in said
    assert admin_token_for("0.0.0.0")[0] != token
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "chosen-token")
    token, said = admin_token_for("0.0.0.0")
    assert token == "chosen-token" and said and "chosen-token" not in said


def test_a_server_beyond_loopback_refuses_admin_writes_without_its_token() -> None:
    """``serve --host 0.0.0.0`` prints that admin writes need a token, and refuses a write without it."""
    with start_server_process(host="0.0.0.0") as server:
        url = f"http://127.0.0.1:{server.port}"
        assert httpx.post(f"{url}/admin/faults", json=RULE).status_code == 401
        server.set_faults(RULE)  # the process helper chose the token and passes it on
        assert httpx.get(f"{url}/admin/faults").json()[0]["fault"] == "500"
        with open(server.log_path) as log:
            assert "admin writes (/admin/*) need the header X-Knowwhen-Admin-Token" in log.read()
