"""A signed-in user's scope names one (provider, subject) pair: issuers hold `:` (URLs, and
`hs256:<iss>`), subjects may too, and no two users may ever share a scope."""

from __future__ import annotations

import pytest

from gateway.auth.identity import signed_in_scope


@pytest.mark.parametrize("first, second", [
    (("https://a.example", "b:c"), ("https://a.example:b", "c")),
    (("hs256:x", "y:z"), ("hs256:x:y", "z")),
    (("https://a.example", "b%3Ac"), ("https://a.example", "b:c")),
])
def test_different_users_never_share_a_scope(first: tuple[str, str],
                                             second: tuple[str, str]) -> None:
    assert signed_in_scope(*first) != signed_in_scope(*second)


def test_the_subject_is_what_follows_the_last_colon() -> None:
    scope = signed_in_scope("https://idp.example:8443/realm", "group:alice%")
    assert scope == "oauth:https://idp.example:8443/realm:group%3Aalice%25"
    assert scope.rpartition(":")[0] == "oauth:https://idp.example:8443/realm"


def test_common_subjects_read_as_before() -> None:
    """Scopes stored before the subject was escaped keep naming the same users."""
    for subject in ("auth0|64f1c2", "user_2NNEqL2nrIRdJ194ndJqAHwEfxC", "1098765432109876543"):
        assert signed_in_scope("https://idp.example/", subject) == \
            f"oauth:https://idp.example/:{subject}"
