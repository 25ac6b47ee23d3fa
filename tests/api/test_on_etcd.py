"""A representative subset of the API tests, unchanged, over a real etcd instead of SQLite.

The test functions are imported from their modules; this module's `api` fixture (an ApiServer on
a single-member etcd, emptied per test) takes the place of the SQLite one for them. Chosen to touch
every store path the API uses: conflicts (txn compares), list pagination and reads of the past
(key ranges at a revision), watches (history from a revision, selectors, live), and deletion.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient

from kubelite.store.etcd import EtcdStore, parse_url
from tests import etcd_cluster
from tests.api.test_pod_lifecycle_api import (  # noqa: F401 (collected here, on etcd)
    test_watch_initial_events_in_resource_version_order,
    test_watch_live_events_and_timeout,
    test_watch_resumes_from_resource_version,
    test_watch_selector_transitions,
)
from tests.api.test_rest import (  # noqa: F401 (collected here, on etcd)
    test_concurrent_label_patches_all_land,
    test_duplicate_create_is_already_exists,
    test_finalizers_hold_deletion,
    test_list_exact_resource_version_reads_the_past,
    test_list_selectors_limit_continue,
    test_stale_update_is_conflict,
    test_status_subresource_separation,
)
from tests.conftest import serving


@pytest.fixture
async def api() -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    cluster = etcd_cluster.shared(1)
    etcd_cluster.wipe(cluster)
    async with serving(await EtcdStore.open(parse_url(cluster.url))) as client:
        yield client
