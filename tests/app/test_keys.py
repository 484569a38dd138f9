"""Saga types in the key schema: the default type keeps the keys of the releases before
types, other types carry their name in the hash tag, and a script's keys share one tag."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from saga.state.errors import InvalidIdError
from saga.state.keys import DEFAULT_TYPE, Keys


def test_the_default_type_keeps_todays_key_names() -> None:
    """documents (the default) forms exactly the keys an existing install has in Redis."""
    k = Keys(prefix="saga", partitions=1)
    assert k.saga_type == DEFAULT_TYPE == "documents"
    assert k.record("r1") == (0, "saga:{p0}:saga:r1", "saga:{p0}:hist:r1", "saga:{p0}:pages:r1")
    assert [k.ready(0, "parser"), k.delayed(0, "parser"), k.dead(0, "parser")] == [
        "saga:{p0}:ready:parser",
        "saga:{p0}:delayed:parser",
        "saga:{p0}:dead:parser",
    ]
    assert [k.quarantine(0), k.stats(0), k.costs(0, "2026-01-02"), k.retired(0)] == [
        "saga:{p0}:quarantine",
        "saga:{p0}:stats",
        "saga:{p0}:costs:2026-01-02",
        "saga:{p0}:retired",
    ]
    assert k.state_indexes(0)[:6] == [
        "saga:{p0}:idx:state:active",
        "saga:{p0}:idx:state:active",
        "saga:{p0}:idx:state:waiting_retry",
        "saga:{p0}:idx:state:completed",
        "saga:{p0}:idx:state:failed",
        "saga:{p0}:idx:state:cancelled",
    ]
    assert [k.user_index(0, "u1"), k.created_index(0), k.review_index(0)] == [
        "saga:{p0}:idx:user:u1",
        "saga:{p0}:idx:created",
        "saga:{p0}:idx:review",
    ]
    assert k.llm_cache("r1", "parser", "ab") == "saga:{p0}:llm:r1:parser:ab"
    assert k.steps_registry() == "saga:steps"


def test_another_type_has_its_own_tag_and_registry() -> None:
    """orders' keys are under {orders.pN}; shared keys (breakers, billing, types) are not."""
    docs = Keys(prefix="saga", partitions=4)
    orders = docs.of_type("orders")
    assert orders == Keys(prefix="saga", partitions=4, saga_type="orders")
    p = orders.partition_of("r1")
    assert orders.record("r1").saga == f"saga:{{orders.p{p}}}:saga:r1"
    assert orders.ready(2, "router") == "saga:{orders.p2}:ready:router"
    assert orders.state_indexes(3)[0] == "saga:{orders.p3}:idx:state:active"
    assert orders.steps_registry() == "saga:steps:orders"
    assert orders.types_registry() == docs.types_registry() == "saga:types"
    assert orders.breaker("llm") == docs.breaker("llm")
    assert orders.billing_key("u1") == docs.billing_key("u1")
    # Same record and step names in two types: no key in common.
    both = [docs, orders]
    assert len({k.saga("r1") for k in both}) == 2
    assert len({k.ready(0, "router") for k in both}) == 2


@pytest.mark.parametrize("saga_type", [DEFAULT_TYPE, "orders"])
def test_a_scripts_keys_share_one_slot(saga_type: str) -> None:
    """Every key of a record and its partition (all a transition touches) is in one slot."""
    k = Keys(prefix="saga", partitions=8, saga_type=saga_type)
    for rid in ("r1", "mr-2024-0001", "x"):
        p = k.partition_of(rid)
        names = [*k.record(rid)[1:], k.ready(p, "router"), k.delayed(p, "router")]
        names += [k.dead(p, "charge"), k.quarantine(p), k.stats(p), k.retired(p)]
        names += [*k.state_indexes(p), k.user_index(p, "u"), k.created_index(p)]
        names += [k.review_index(p), k.costs(p, "2026-01-01")]
        assert len({key_slot(n.encode()) for n in names}) == 1, names


def test_type_names_are_checked() -> None:
    """A type name that could break a key or a tag is refused."""
    for bad in ("Orders", "a.b", "{x}", "", "a" * 33, "orders:v2"):
        with pytest.raises(InvalidIdError, match="saga type name"):
            Keys(saga_type=bad)
