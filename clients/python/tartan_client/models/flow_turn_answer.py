from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FlowTurnAnswer")


@_attrs_define
class FlowTurnAnswer:
    """`GET /engine/flow/{id}/turn`.

    Attributes:
        id (str):
        key (str): The flow's concurrency key.
        limit (int): How many of the key's flows may run at once.
        place (int): Among the key's waiting flows, 1 for the next to run; 0 once running.
        running (int): The key's flows running now.
        state (str): `waiting` for its turn, or `running`. Example: waiting.
        waiting (int): The key's flows waiting now.
    """

    id: str
    key: str
    limit: int
    place: int
    running: int
    state: str
    waiting: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        key = self.key

        limit = self.limit

        place = self.place

        running = self.running

        state = self.state

        waiting = self.waiting

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "key": key,
                "limit": limit,
                "place": place,
                "running": running,
                "state": state,
                "waiting": waiting,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        key = d.pop("key")

        limit = d.pop("limit")

        place = d.pop("place")

        running = d.pop("running")

        state = d.pop("state")

        waiting = d.pop("waiting")

        flow_turn_answer = cls(
            id=id,
            key=key,
            limit=limit,
            place=place,
            running=running,
            state=state,
            waiting=waiting,
        )

        flow_turn_answer.additional_properties = d
        return flow_turn_answer

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
