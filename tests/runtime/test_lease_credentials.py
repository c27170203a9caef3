"""The Lease's API client when its service-account files cannot be read (a volume being remounted):
an error the renewal loop handles (LeaseError), never an exception that ends the loop's thread."""

from __future__ import annotations

import pathlib

import pytest

from streamapp.runtime import apiserver


def test_an_unreadable_token_or_ca_file_is_a_lease_error(tmp_path: pathlib.Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    gone_ca = apiserver.InCluster("https://127.0.0.1:1", token, tmp_path / "ca.crt")
    with pytest.raises(apiserver.LeaseError, match=r"ca\.crt|No such file"):
        gone_ca.request("GET", "/")
    gone_token = apiserver.InCluster("https://127.0.0.1:1", tmp_path / "missing-token", None)
    with pytest.raises(apiserver.LeaseError, match="missing-token"):
        gone_token.request("GET", "/")
