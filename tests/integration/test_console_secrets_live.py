"""No secret of the configuration reaches the console's pages or JSON (issue #18, acceptance 2): a console
over a configuration with distinctive secrets (a masking salt, an SMTP password, a webhook URL with a token,
the session key, the users' hashes) is crawled as an operator: every page a link leads to and every JSON
endpoint without arguments; none of them holds any of those values, nor a password of the sources."""

from __future__ import annotations

import uuid

import pytest
import yaml
from console_env import ConsoleServer, add_made_secrets, crawl, distinctive_secrets, json_endpoints, session

from dbuslib.config import DbusConfig, load_config, raw_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secret_console(cfg: DbusConfig, tmp_path_factory):
    raw = raw_config(cfg.path)
    made = add_made_secrets(raw, "demo", "shop.customers")
    path = cfg.path.parent / f".test-console-secrets-{uuid.uuid4().hex[:8]}.yaml"  # relative paths hold
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    try:
        loaded = load_config(path)
        server = ConsoleServer(path, tmp_path_factory.mktemp("console-secrets")).start()
        try:
            values = distinctive_secrets(loaded, raw)
            values |= {*made.values(), *server.passwords.values(), *server.hashes.values()}
            yield server, loaded, values
        finally:
            server.stop()
    finally:
        path.unlink(missing_ok=True)


def test_no_secret_reaches_a_page_or_a_json_answer(secret_console) -> None:
    server, cfg, values = secret_console
    # pages whose links the page's script makes: a masked table's (a log table's rules page is linked from
    # /rules/ when the log source has tables: crawled then)
    shown = ["/tables/demo/shop.customers", "/tables/api/demo/shop.customers"]
    answers = crawl(server, session(server, "operator"), ["/", *json_endpoints(cfg), *shown])
    for path, (status, body) in answers.items():
        if path == "/tables/demo/shop.customers":  # the salted rule is shown, its salt is not
            assert "sha256" in body and "email" in body, body[:2000]
        leaked = sorted(v[:12] + "..." for v in values if v in body)
        assert not leaked, f"{path} ({status}) holds secret(s) {leaked}"
    seen = {p: s for p, (s, _) in answers.items()}
    pages = [p for p in seen if "/api/" not in p]
    print(f"\ncrawled {len(seen)} answers: {seen}")
    assert len(pages) >= 6 and all(status == 200 for status in seen.values()), seen
