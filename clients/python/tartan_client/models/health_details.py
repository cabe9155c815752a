from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.health_backend import HealthBackend
    from ..models.health_streams import HealthStreams


T = TypeVar("T", bound="HealthDetails")


@_attrs_define
class HealthDetails:
    """What `GET /health` reports about the process (docs/durability.md,
    "Call slots").

        Attributes:
            active_flows (int):
            calls_deferred (int):
            calls_in_flight (int):
            calls_queued (int):
            max_active_flows (int):
            max_calls (int):
            max_calls_per_step (int):
            max_inflight_bytes (int):
            max_queued_calls (int):
            node_id (str):
            response_bytes_held (int): Bytes of step response bodies held, from reading to recording.
            store (str):  Example: sqlite.
            timers (int):
            version (str):
            backend (HealthBackend | Unset): `/health`'s `details.backend` (docs/argyll.md, "Several engines behind
                a proxy").
            websocket (HealthStreams | Unset): `/health`'s `details.websocket`.
    """

    active_flows: int
    calls_deferred: int
    calls_in_flight: int
    calls_queued: int
    max_active_flows: int
    max_calls: int
    max_calls_per_step: int
    max_inflight_bytes: int
    max_queued_calls: int
    node_id: str
    response_bytes_held: int
    store: str
    timers: int
    version: str
    backend: HealthBackend | Unset = UNSET
    websocket: HealthStreams | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active_flows = self.active_flows

        calls_deferred = self.calls_deferred

        calls_in_flight = self.calls_in_flight

        calls_queued = self.calls_queued

        max_active_flows = self.max_active_flows

        max_calls = self.max_calls

        max_calls_per_step = self.max_calls_per_step

        max_inflight_bytes = self.max_inflight_bytes

        max_queued_calls = self.max_queued_calls

        node_id = self.node_id

        response_bytes_held = self.response_bytes_held

        store = self.store

        timers = self.timers

        version = self.version

        backend: dict[str, Any] | Unset = UNSET
        if not isinstance(self.backend, Unset):
            backend = self.backend.to_dict()

        websocket: dict[str, Any] | Unset = UNSET
        if not isinstance(self.websocket, Unset):
            websocket = self.websocket.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active_flows": active_flows,
                "calls_deferred": calls_deferred,
                "calls_in_flight": calls_in_flight,
                "calls_queued": calls_queued,
                "max_active_flows": max_active_flows,
                "max_calls": max_calls,
                "max_calls_per_step": max_calls_per_step,
                "max_inflight_bytes": max_inflight_bytes,
                "max_queued_calls": max_queued_calls,
                "node_id": node_id,
                "response_bytes_held": response_bytes_held,
                "store": store,
                "timers": timers,
                "version": version,
            }
        )
        if backend is not UNSET:
            field_dict["backend"] = backend
        if websocket is not UNSET:
            field_dict["websocket"] = websocket

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.health_backend import HealthBackend
        from ..models.health_streams import HealthStreams

        d = dict(src_dict)
        active_flows = d.pop("active_flows")

        calls_deferred = d.pop("calls_deferred")

        calls_in_flight = d.pop("calls_in_flight")

        calls_queued = d.pop("calls_queued")

        max_active_flows = d.pop("max_active_flows")

        max_calls = d.pop("max_calls")

        max_calls_per_step = d.pop("max_calls_per_step")

        max_inflight_bytes = d.pop("max_inflight_bytes")

        max_queued_calls = d.pop("max_queued_calls")

        node_id = d.pop("node_id")

        response_bytes_held = d.pop("response_bytes_held")

        store = d.pop("store")

        timers = d.pop("timers")

        version = d.pop("version")

        _backend = d.pop("backend", UNSET)
        backend: HealthBackend | Unset
        if isinstance(_backend, Unset):
            backend = UNSET
        else:
            backend = HealthBackend.from_dict(_backend)

        _websocket = d.pop("websocket", UNSET)
        websocket: HealthStreams | Unset
        if isinstance(_websocket, Unset):
            websocket = UNSET
        else:
            websocket = HealthStreams.from_dict(_websocket)

        health_details = cls(
            active_flows=active_flows,
            calls_deferred=calls_deferred,
            calls_in_flight=calls_in_flight,
            calls_queued=calls_queued,
            max_active_flows=max_active_flows,
            max_calls=max_calls,
            max_calls_per_step=max_calls_per_step,
            max_inflight_bytes=max_inflight_bytes,
            max_queued_calls=max_queued_calls,
            node_id=node_id,
            response_bytes_held=response_bytes_held,
            store=store,
            timers=timers,
            version=version,
            backend=backend,
            websocket=websocket,
        )

        health_details.additional_properties = d
        return health_details

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
