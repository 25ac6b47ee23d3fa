"""RequestInfo from URLs, ported from k8s.io/apiserver/pkg/endpoints/request/requestinfo_test.go."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from kubelite.apiserver.auth.requestinfo import RequestInfo, new_request_info


def info(method: str, url: str) -> RequestInfo:
    parts = urlsplit(url)
    return new_request_info(method, parts.path, dict(parse_qsl(parts.query)))


# TestGetAPIRequestInfo successCases: method, url, verb, group, version, namespace, resource, subresource, name, parts
API_CASES = [
    # resource paths
    ("GET", "/api/v1/namespaces", "list", "", "v1", "", "namespaces", "", "", ["namespaces"]),
    ("GET", "/api/v1/namespaces/other", "get", "", "v1", "other", "namespaces", "", "other", ["namespaces", "other"]),
    ("GET", "/api/v1/namespaces/other/pods", "list", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("GET", "/api/v1/pods", "list", "", "v1", "", "pods", "", "", ["pods"]),
    ("HEAD", "/api/v1/pods", "list", "", "v1", "", "pods", "", "", ["pods"]),
    ("PATCH", "/api/v1/namespaces/new-namespace", "patch", "", "v1", "", "namespaces", "", "new-namespace",
     ["namespaces", "new-namespace"]),
    # special verbs
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "", "v1", "other", "pods",
     "", "foo", ["pods", "foo", "subpath", "not", "a", "subresource"]),
    ("GET", "/api/v1/watch/pods", "watch", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/pods?watch=true", "watch", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/pods?watch=false", "list", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "", "v1", "other", "pods", "", "", ["pods"]),
    # subresource identification
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "", "v1", "other", "pods", "status", "foo",
     ["pods", "foo", "status"]),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "", "v1", "other", "pods", "proxy", "foo",
     ["pods", "foo", "proxy", "subpath"]),
    ("PUT", "/api/v1/namespaces/other/finalize", "update", "", "v1", "other", "namespaces", "finalize", "other",
     ["namespaces", "other", "finalize"]),
    ("PUT", "/api/v1/namespaces/other/status", "update", "", "v1", "other", "namespaces", "status", "other",
     ["namespaces", "other", "status"]),
    # verb identification
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("POST", "/api/v1/namespaces/other/pods", "create", "", "v1", "other", "pods", "", "", ["pods"]),
    # deletecollection verb identification
    ("DELETE", "/api/v1/nodes", "deletecollection", "", "v1", "", "nodes", "", "", ["nodes"]),
    ("DELETE", "/api/v1/namespaces", "deletecollection", "", "v1", "", "namespaces", "", "", ["namespaces"]),
    ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "", "v1", "other", "pods", "", "", ["pods"]),
    ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "extensions", "v1", "other", "pods",
     "", "", ["pods"]),
    # api group identification
    ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "extensions", "v1", "other", "pods", "", "",
     ["pods"]),
    # api version identification
    ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "extensions", "v1beta3", "other", "pods", "",
     "", ["pods"]),
    # kubelite's own subresources parse the same way
    ("POST", "/api/v1/namespaces/ns/serviceaccounts/default/token", "create", "", "v1", "ns", "serviceaccounts",
     "token", "default", ["serviceaccounts", "default", "token"]),
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "create", "authentication.k8s.io", "v1", "",
     "selfsubjectreviews", "", "", ["selfsubjectreviews"]),
]


@pytest.mark.parametrize(("method", "url", "verb", "group", "version", "namespace", "resource", "subresource",
                          "name", "parts"), API_CASES, ids=[f"{c[0]} {c[1]}" for c in API_CASES])
def test_get_api_request_info(method: str, url: str, verb: str, group: str, version: str, namespace: str,
                              resource: str, subresource: str, name: str, parts: list[str]) -> None:
    got = info(method, url)
    assert got.is_resource_request
    assert (got.verb, got.api_group, got.api_version, got.namespace, got.resource, got.subresource, got.name,
            list(got.parts)) == (verb, group, version, namespace, resource, subresource, name, parts)


# TestGetAPIRequestInfo errorCases: paths that are not resource requests.
API_ERROR_CASES = {
    "no resource path": "/",
    "just apiversion": "/api/version/",
    "just prefix, group, version": "/apis/group/version/",
    "apiversion with no resource": "/api/version/",
    "bad prefix": "/badprefix/version/resource",
    "missing api group": "/apis/version/resource",
    "special verb without a resource (upstream: an error)": "/api/v1/watch",
}


@pytest.mark.parametrize("url", API_ERROR_CASES.values(), ids=API_ERROR_CASES.keys())
def test_get_api_request_info_non_resource(url: str) -> None:
    got = info("GET", url)
    assert not got.is_resource_request
    assert (got.verb, got.path) == ("get", url)


# TestGetNonAPIRequestInfo
NON_API_CASES = {
    "simple groupless": ("/api/version/resource", True),
    "simple group": ("/apis/group/version/resource/name/subresource", True),
    "more steps": ("/api/version/resource/name/subresource", True),
    "group list": ("/apis/batch/v1/job", True),
    "group get": ("/apis/batch/v1/job/foo", True),
    "group subresource": ("/apis/batch/v1/job/foo/scale", True),
    "bad root": ("/not-api/version/resource", False),
    "group without enough steps": ("/apis/extensions/v1beta1", False),
    "group without enough steps 2": ("/apis/extensions/v1beta1/", False),
    "not enough steps": ("/api/version", False),
    "one step": ("/api", False),
    "zero step": ("/", False),
    "empty": ("", False),
}


@pytest.mark.parametrize(("url", "expected"), NON_API_CASES.values(), ids=NON_API_CASES.keys())
def test_get_non_api_request_info(url: str, expected: bool) -> None:
    assert info("GET", url).is_resource_request is expected


# TestFieldSelectorParsing: name, url, expected name, expected verb
FIELD_SELECTOR_CASES = [
    ("no selector", "/apis/group/version/resource", "", "list"),
    ("metadata.name selector", "/apis/group/version/resource?fieldSelector=metadata.name=name1", "name1", "list"),
    ("metadata.name selector with watch",
     "/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1", "name1", "watch"),
    ("random selector", "/apis/group/version/resource?fieldSelector=foo=bar", "", "list"),
    ("invalid selector with metadata.name", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo", "",
     "list"),
    ("invalid selector with metadata.name with watch",
     "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true", "", "watch"),
    ("invalid selector with metadata.name with watch false",
     "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false", "", "list"),
]


@pytest.mark.parametrize(("url", "name", "verb"), [c[1:] for c in FIELD_SELECTOR_CASES],
                         ids=[c[0] for c in FIELD_SELECTOR_CASES])
def test_field_selector_parsing(url: str, name: str, verb: str) -> None:
    got = info("GET", url)
    assert (got.name, got.verb) == (name, verb)
