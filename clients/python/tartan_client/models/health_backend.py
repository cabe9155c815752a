from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="HealthBackend")


@_attrs_define
class HealthBackend:
    """`/health`'s `details.backend` (docs/argyll.md, "Several engines behind
    a proxy").

        Attributes:
            state (str): `leader` while this engine takes writes, else `follower`: the
                `X-Argyll-Raft-State` header's value. Example: leader.
            type_ (str): `sqlite` or `postgres`. Example: postgres.
    """

    state: str
    type_: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        state = self.state

        type_ = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "state": state,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        state = d.pop("state")

        type_ = d.pop("type")

        health_backend = cls(
            state=state,
            type_=type_,
        )

        health_backend.additional_properties = d
        return health_backend

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
