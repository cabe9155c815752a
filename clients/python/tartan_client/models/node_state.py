from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_state_health import NodeStateHealth


T = TypeVar("T", bound="NodeState")


@_attrs_define
class NodeState:
    """One engine: its heartbeat and the health of every step. The engines
    share the checks out and see the same results (docs/operating.md,
    "Health checks and the cluster"), so every node shows the same health.

        Attributes:
            health (NodeStateHealth):
            last_seen (datetime.datetime):
            started_at (datetime.datetime):
            calls_held (int | Unset): Work items whose lease this engine holds: its calls in flight or
                waiting for a call slot (Tartan's; Argyll's answer has none).
    """

    health: NodeStateHealth
    last_seen: datetime.datetime
    started_at: datetime.datetime
    calls_held: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        health = self.health.to_dict()

        last_seen = self.last_seen.isoformat()

        started_at = self.started_at.isoformat()

        calls_held = self.calls_held

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "health": health,
                "last_seen": last_seen,
                "started_at": started_at,
            }
        )
        if calls_held is not UNSET:
            field_dict["calls_held"] = calls_held

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.node_state_health import NodeStateHealth

        d = dict(src_dict)
        health = NodeStateHealth.from_dict(d.pop("health"))

        last_seen = datetime.datetime.fromisoformat(d.pop("last_seen"))

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        calls_held = d.pop("calls_held", UNSET)

        node_state = cls(
            health=health,
            last_seen=last_seen,
            started_at=started_at,
            calls_held=calls_held,
        )

        node_state.additional_properties = d
        return node_state

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
