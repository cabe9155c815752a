from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FeedMessage")


@_attrs_define
class FeedMessage:
    """One message of the global stream: a flow event and its position.

    Attributes:
        aggregate_id (list[str]): `["catalog"]`, or `["flow", "<flow id>"]`.
        data (Any):
        sequence (int):
        timestamp (datetime.datetime):
        type_ (str):  Example: flow_started.
        position (int): The event's global position (also the message's id).
    """

    aggregate_id: list[str]
    data: Any
    sequence: int
    timestamp: datetime.datetime
    type_: str
    position: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        aggregate_id = self.aggregate_id

        data = self.data

        sequence = self.sequence

        timestamp = self.timestamp.isoformat()

        type_ = self.type_

        position = self.position

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "aggregate_id": aggregate_id,
                "data": data,
                "sequence": sequence,
                "timestamp": timestamp,
                "type": type_,
                "position": position,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        aggregate_id = cast(list[str], d.pop("aggregate_id"))

        data = d.pop("data")

        sequence = d.pop("sequence")

        timestamp = datetime.datetime.fromisoformat(d.pop("timestamp"))

        type_ = d.pop("type")

        position = d.pop("position")

        feed_message = cls(
            aggregate_id=aggregate_id,
            data=data,
            sequence=sequence,
            timestamp=timestamp,
            type_=type_,
            position=position,
        )

        feed_message.additional_properties = d
        return feed_message

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
