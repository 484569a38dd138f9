"""Two saga types for the App tests, both with a step named ``router``, as a user's
module would define them (``saga worker tests.app.apps:orders``).

Each step writes its type and step into the output's trail, so a test can tell which
type's code ran for a saga: interference would show as a foreign entry.
"""

from __future__ import annotations

import msgspec

import saga


class Order(msgspec.Struct, frozen=True, kw_only=True):
    sku: str
    qty: int
    trail: list[str] = []


class Routed(msgspec.Struct, frozen=True, kw_only=True):
    sku: str
    qty: int
    lane: str
    trail: list[str]


class Charged(msgspec.Struct, frozen=True, kw_only=True):
    sku: str
    amount: float
    trail: list[str]


class Parcel(msgspec.Struct, frozen=True, kw_only=True):
    """The input of ``ship``: only the fields it needs of ``Charged`` (a structural fit)."""

    sku: str
    trail: list[str]


class Shipment(msgspec.Struct, frozen=True, kw_only=True):
    sku: str
    trail: list[str]


orders = saga.App("orders")


@orders.step(name="router", retries=2, backoff=0.05)
async def route_order(ctx: saga.StepContext, order: Order) -> Routed:
    lane = "bulk" if order.qty > 10 else "small"
    return Routed(sku=order.sku, qty=order.qty, lane=lane, trail=[*order.trail, "orders/router"])


async def refund_charge(ctx: saga.StepContext, inp: Routed, out: Charged, key: str) -> None:
    """The compensation ``charge`` declares (run by the compensation engine, not yet here)."""


@orders.step(after=route_order, compensate=refund_charge)
async def charge(ctx: saga.StepContext, routed: Routed) -> Charged:
    return Charged(sku=routed.sku, amount=routed.qty * 2.5, trail=[*routed.trail, "orders/charge"])


@orders.step(after=charge)
async def ship(ctx: saga.StepContext, parcel: Parcel) -> Shipment:
    return Shipment(sku=parcel.sku, trail=[*parcel.trail, "orders/ship"])


class Refund(msgspec.Struct, frozen=True, kw_only=True):
    order: str
    cents: int


class RoutedRefund(msgspec.Struct, frozen=True, kw_only=True):
    order: str
    cents: int
    trail: list[str]


class Paid(msgspec.Struct, frozen=True, kw_only=True):
    order: str
    trail: list[str]


refunds = saga.App("refunds")


@refunds.step(name="router")
async def route_refund(ctx: saga.StepContext, refund: Refund) -> RoutedRefund:
    return RoutedRefund(order=refund.order, cents=refund.cents, trail=["refunds/router"])


@refunds.step(after="router")
async def pay_back(ctx: saga.StepContext, routed: RoutedRefund) -> Paid:
    return Paid(order=routed.order, trail=[*routed.trail, "refunds/pay_back"])
