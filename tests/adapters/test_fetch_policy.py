"""The fetch policy's decisions as plain functions: URL prefixes, addresses, roots, settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from saga.adapters.fetch_policy import FetchPolicy, build_policy, template_prefix
from saga.config.settings import SettingsError, load_settings
from saga.steps.errors import PermanentError, PolicyError

RECORDS = "https://records.internal/api/records/{record_id}/document"


def _url_allowed(policy: FetchPolicy, url: str) -> bool:
    try:
        policy.check_url(url)
    except PolicyError:
        return False
    return True


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://records.internal/api/records/r1/document", True),
        ("https://records.internal/api/records/r1/document?sig=x", True),
        ("https://RECORDS.internal:443/api/records/r2/document", True),
        ("https://records.internal/api/recordsX/r1", False),  # not at a segment boundary
        ("https://records.internal/api/admin", False),
        ("https://records.internal/api/records/../admin", False),
        ("https://records.internal/api/records/%2e%2e/admin", False),
        ("https://records.internal/api/records/%252e%252e/admin", False),
        ("https://records.internal/api/records/..%5cadmin", False),
        ("https://records.internal:8443/api/records/r1/document", False),  # another port
        ("http://records.internal/api/records/r1/document", False),  # another scheme
        ("https://records.internal.evil.example/api/records/r1", False),
        ("https://records.internal@evil.example/api/records/r1", False),  # userinfo trick
        ("https://evil.example/api/records/r1/document", False),
    ],
)
def test_template_prefix_allows_only_its_own_urls(url: str, allowed: bool) -> None:
    """A URL template allows URLs under its own prefix: same scheme, host and port, a path
    inside it at a segment boundary, no dot segments (however encoded)."""
    assert _url_allowed(FetchPolicy(template=RECORDS), url) is allowed


def test_listed_prefixes_and_a_scheme_only_prefix() -> None:
    """SAGA_DOCUMENT_URL_PREFIXES adds prefixes; ``https://`` alone allows any https host."""
    policy = FetchPolicy(url_prefixes=("https://bucket.s3.example/reports",))
    assert _url_allowed(policy, "https://bucket.s3.example/reports/r1.pdf")
    assert _url_allowed(policy, "https://bucket.s3.example/reports")
    assert not _url_allowed(policy, "https://bucket.s3.example/reports-old/r1.pdf")
    anywhere = FetchPolicy(url_prefixes=("https://",))
    assert _url_allowed(anywhere, "https://any.example/x.pdf")
    assert not _url_allowed(anywhere, "http://any.example/x.pdf")


def test_no_prefix_means_no_url_and_says_which_setting() -> None:
    """With neither a URL template nor prefixes, every URL is refused, naming the setting."""
    with pytest.raises(PolicyError, match="SAGA_DOCUMENT_URL_PREFIXES") as caught:
        FetchPolicy(template="/data/{record_id}.pdf").check_url("https://h/x")
    assert isinstance(caught.value, PermanentError)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("224.0.0.251", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "non-public"),
    ],
)
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    """Loopback, private, link-local (cloud metadata), multicast and shared addresses are
    refused with their kind and the setting that would allow them."""
    with pytest.raises(PolicyError, match=f"a {kind} address; allow its network with SAGA_"):
        FetchPolicy().check_address("records.internal", address)


def test_public_and_allowed_networks_pass() -> None:
    """Public addresses pass; a non-public one passes inside SAGA_DOCUMENT_NETWORKS only."""
    FetchPolicy().check_address("example.org", "93.184.215.14")
    FetchPolicy().check_address("example.org", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    allowed = FetchPolicy(networks=("10.0.0.0/8",))
    allowed.check_address("records.internal", "10.20.30.40")
    with pytest.raises(PolicyError, match="its host resolves to a link-local address") as caught:
        allowed.check_address("records.internal", "169.254.169.254")
    # the host and address are the operator's detail, not the message anyone may see
    assert "records.internal" not in str(caught.value) and "169.254" not in str(caught.value)
    assert "records.internal" in caught.value.detail and "169.254.169.254" in caught.value.detail


def test_local_paths_only_inside_a_root(tmp_path: Path) -> None:
    """A path inside a root (or the template's directory) is allowed; outside, refused."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "data").mkdir()
    policy = FetchPolicy(roots=(str(tmp_path / "docs"),), template=f"{tmp_path}/data/{{record_id}}")
    assert policy.check_path(tmp_path / "docs" / "a.pdf") == tmp_path / "docs" / "a.pdf"
    policy.check_path(tmp_path / "data" / "r1")
    for outside in (Path("/etc/passwd"), tmp_path / "docs" / ".." / "secret.pdf"):
        with pytest.raises(PolicyError, match="outside the allowed document directories"):
            policy.check_path(outside)
    with pytest.raises(PolicyError, match="not allowed here"):
        FetchPolicy().check_path(tmp_path / "docs" / "a.pdf")
    as_url = FetchPolicy(template=f"{(tmp_path / 'data').as_uri()}/{{record_id}}.pdf")
    assert as_url.all_roots() == (tmp_path / "data",)
    assert FetchPolicy(template=RECORDS).all_roots() == ()


def test_template_prefix_cuts_at_the_last_slash() -> None:
    """The allowed prefix of a template ends at the last / before {record_id}."""
    assert template_prefix(RECORDS) == "https://records.internal/api/records/"
    assert template_prefix("/data/rec-{record_id}.pdf") == "/data/"
    assert template_prefix("/data/all.pdf") == ""


def test_default_roots_outside_and_inside_kubernetes(tmp_path: Path) -> None:
    """Unset SAGA_DOCUMENT_ROOTS: the current directory and the samples outside
    Kubernetes, nothing inside it; ``none`` means no local documents anywhere."""
    laptop = load_settings({"SAGA_DATA_DIR": "/t"}).document_policy
    assert str(Path.cwd()) in laptop.roots
    samples = [Path(r) for r in laptop.roots if r.endswith("samples")]
    assert samples and list(samples[0].glob("*.pdf")), "the shipped samples' folder"
    pod = load_settings({"SAGA_DATA_DIR": "/t", "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert pod.document_policy.roots == ()
    none = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_DOCUMENT_ROOTS": "none"})
    assert none.document_policy.roots == ()
    listed = load_settings({"SAGA_DATA_DIR": "/t", "SAGA_DOCUMENT_ROOTS": f"{tmp_path}, /srv"})
    assert listed.document_policy.roots == (str(tmp_path), "/srv")


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("SAGA_DOCUMENT_NETWORKS", "10.0.0.0/8,intranet", "'intranet' is not a network"),
        ("SAGA_DOCUMENT_URL_PREFIXES", "ftp://files/", "must be an http(s) URL prefix"),
        ("SAGA_DOCUMENT_URL_PREFIXES", "https://h/docs?sig=1", "without query"),
    ],
)
def test_bad_policy_settings_name_the_variable(name: str, value: str, says: str) -> None:
    """A bad list item is a SettingsError naming the variable and the item."""
    with pytest.raises(SettingsError, match=name) as caught:
        load_settings({"SAGA_DATA_DIR": "/t", name: value})
    assert says in str(caught.value)


def test_networks_are_normalised() -> None:
    """A network written with host bits set means its network."""
    policy = build_policy(
        template="", url_prefixes="", roots="none", networks="10.1.2.3/8", default_roots=[]
    )
    assert policy.networks == ("10.0.0.0/8",)


def test_the_filesystem_root_is_never_a_default_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker started in / does not get every file as its default root."""
    monkeypatch.chdir("/")
    roots = load_settings({"SAGA_DATA_DIR": "/t"}).document_policy.roots
    assert "/" not in roots and len(roots) == 1 and roots[0].endswith("samples")


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    """A path that loops on itself is refused with a sentence, not a crash."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(PolicyError, match="its path does not resolve"):
        FetchPolicy(roots=(str(tmp_path),)).check_path(tmp_path / "loop")
