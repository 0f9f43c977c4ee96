"""The `permissions` blocks of nats-server's config format, read into `Settings`."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook import limits
from brook.config.conf import load_conf_file, parse_conf, settings_from_conf
from brook.config.settings import (
    ConfigError,
    Permissions,
    ResponsePermission,
    Settings,
    SubjectPermission,
)


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def user_permissions(block: str) -> Permissions | None:
    s = conf(f"authorization {{ users: [ {{user: a, password: b, permissions: {block}}} ] }}")
    return s.auth.users[0].permissions


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        # A list (or one subject) is an allow list; the other direction is unrestricted.
        ('{publish: ["a", "b.>"]}', Permissions(publish=SubjectPermission(["a", "b.>"]))),
        ('{pub: "a", sub: "b"}', Permissions(SubjectPermission(["a"]), SubjectPermission(["b"]))),
        (
            '{import: "a", export: {allow: "x", deny: ["y", "z *"]}}',
            Permissions(SubjectPermission(["a"]), SubjectPermission(["x"], ["y", "z *"])),
        ),
        (
            '{subscribe: ["foo.> q", "bar v1.*"]}',
            Permissions(subscribe=SubjectPermission(["foo.> q", "bar v1.*"])),
        ),
        # nats-server: an empty list or block restricts nothing.
        ("{publish: []}", Permissions(publish=SubjectPermission(None))),
        ("{publish: {}}", Permissions()),
        ("{}", Permissions()),
        # allow_responses turns off the blanket publish allow, keeping a given list.
        (
            "{allow_responses: true}",
            Permissions(publish=SubjectPermission([]), responses=ResponsePermission()),
        ),
        (
            '{publish: "x", publish_allow_responses: {max: 5, expires: "1m"}}',
            Permissions(SubjectPermission(["x"]), responses=ResponsePermission(5, 60.0)),
        ),
        # 0 keeps the default; a negative value means no bound.
        (
            '{allow_responses: {max: 0, ttl: "-1s"}}',
            Permissions(SubjectPermission([]), responses=ResponsePermission(1, -1.0)),
        ),
        ("{allow_responses: false}", Permissions()),
    ],
)
def test_permission_forms(block: str, expected: Permissions) -> None:
    assert user_permissions(block) == expected


def test_allow_responses_defaults_are_nats_servers() -> None:
    assert ResponsePermission() == ResponsePermission(1, 120.0)
    assert limits.ALLOW_RESPONSES_EXPIRES_S == 120.0


def test_default_permissions_go_to_users_without_their_own() -> None:
    s = conf(
        """authorization {
          default_permissions: { publish: "d" }
          users: [ {user: a, password: a}, {user: b, password: b, permissions: {sub: "x"}},
                   {user: c, password: c, permissions: {}} ]
        }"""
    )
    perms = {u.user: u.permissions for u in s.auth.users}
    assert perms == {
        "a": Permissions(publish=SubjectPermission(["d"])),
        "b": Permissions(subscribe=SubjectPermission(["x"])),
        "c": Permissions(),
    }
    # `permissions` in the block is the same as default_permissions there, as in nats-server.
    s = conf('authorization { permissions: {publish: "d"}, users: [{user: a, password: a}] }')
    assert s.auth.users[0].permissions == Permissions(publish=SubjectPermission(["d"]))


def test_single_user_form_takes_no_default_permissions() -> None:
    """nats-server applies the block's permissions to its users list only."""
    s = conf('authorization { user: a, password: b, permissions: {publish: "x"} }')
    assert s.auth.users[0].permissions is None


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ('{publish: "a b"}', "permissions.publish: subject 'a b' is not a valid subject"),
        ('{publish: {deny: ["a.>.b"]}}', "permissions.publish.deny: subject 'a.>.b' is not"),
        ('{subscribe: "a q r"}', "permissions.subscribe: subject 'a q r' is not a valid subject"),
        ('{subscribe: "a. q"}', "permissions.subscribe: subject 'a.' is not a valid subject"),
        ('{subscribe: "a q.."}', "permissions.subscribe: queue 'q..' is not a valid queue"),
        ("{publish: [1]}", "permissions.publish[0]: expected a string, got integer 1"),
        ('{publish: {allowed: "x"}}', "unknown configuration key 'authorization.users[0]"),
        ("{allow_responses: 1}", "permissions.allow_responses: expected a block"),
        ("{allow_responses: {expires: 5}}", "allow_responses.expires: expected a duration string"),
        ("{allow_responses: {max: 1, every: 2}}", "key 'authorization.users[0].permissions.allow_"),
        ('{bogus: "x"}', "unknown configuration key 'authorization.users[0].permissions.bogus'"),
    ],
)
def test_permission_errors(block: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        user_permissions(block)
    assert message in str(err.value)


def test_unknown_key_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "a.conf"
    path.write_text(
        "port: 4222\nauthorization {\n  users: [\n    {user: a, password: b,\n"
        "     permissions: {publish: x, sub: {deny: y, al: z}}}\n  ]\n}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_conf_file(str(path))
    assert str(err.value).endswith(
        "unknown configuration key 'authorization.users[0].permissions.sub.al' (line 5)"
    )
