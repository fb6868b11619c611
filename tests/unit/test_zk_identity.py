"""``dbuslib.zk._check_identity``: the session's first request tells a refused session and a wrong digest
password at once (ZOOKEEPER_AUTH_FAILED), before anything is written."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoNodeError, SessionClosedRequireSaslError
from kazoo.security import make_acl, make_digest_acl

from dbuslib.config import ZooKeeperEndpoint
from dbuslib.zk import ZooKeeperAuthFailed, _check_identity

AUTH = {"username": "dbus", "password": "s3cret-pw"}


class FakeZk:
    def __init__(self, answer) -> None:
        self.answer = answer

    def get_acls(self, path: str):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer, None


def endpoint(auth: dict | None = AUTH) -> ZooKeeperEndpoint:
    return ZooKeeperEndpoint(hosts="zk:2181", auth=auth)


@pytest.mark.parametrize(
    ("acls", "auth"),
    [
        ([make_digest_acl("dbus", "s3cret-pw", all=True), make_acl("world", "anyone", read=True)], AUTH),
        ([make_acl("world", "anyone", all=True)], AUTH),  # an open root: anyone may write
        ([make_acl("world", "anyone", all=True)], None),
        ([make_digest_acl("dbus", "other", all=True)], None),  # no identity: ZooKeeper says so at a write
    ],
)
def test_an_identity_that_may_change_the_root_passes(acls, auth) -> None:
    _check_identity(FakeZk(acls), endpoint(auth))


def test_a_root_not_made_yet_passes() -> None:
    _check_identity(FakeZk(NoNodeError()), endpoint())


def test_a_wrong_password_is_refused_naming_the_user_not_the_password() -> None:
    acls = [make_digest_acl("dbus", "the-right-one", all=True), make_acl("world", "anyone", read=True)]
    with pytest.raises(
        ZooKeeperAuthFailed, match=r"ZooKeeper at zk:2181: /DBus may be changed by .*'dbus'"
    ) as e:
        _check_identity(FakeZk(acls), endpoint())
    assert e.value.code == "ZOOKEEPER_AUTH_FAILED" and e.value.exit_code == 3 and not e.value.retriable
    assert "s3cret-pw" not in str(e.value) and "the-right-one" not in str(e.value)


@pytest.mark.parametrize("auth", [None, AUTH])
def test_a_session_the_server_closes_is_refused(auth) -> None:
    with pytest.raises(ZooKeeperAuthFailed, match="ZooKeeper at zk:2181 refused") as e:
        _check_identity(FakeZk(SessionClosedRequireSaslError()), endpoint(auth))
    assert ("endpoints.zookeeper.auth" in str(e.value)) == (auth is None)
