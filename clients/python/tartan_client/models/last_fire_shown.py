from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LastFireShown")


@_attrs_define
class LastFireShown:
    """The last fire of a schedule.

    Attributes:
        at (datetime.datetime):
        outcome (str): `started`, `skipped`, `buffered`, `missed` or `failed`.
        flow_id (None | str | Unset): The flow it started (or, when it started none, the one still running).
        flow_status (None | str | Unset): That flow's status (absent once the flow is deleted).
    """

    at: datetime.datetime
    outcome: str
    flow_id: None | str | Unset = UNSET
    flow_status: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        outcome = self.outcome

        flow_id: None | str | Unset
        if isinstance(self.flow_id, Unset):
            flow_id = UNSET
        else:
            flow_id = self.flow_id

        flow_status: None | str | Unset
        if isinstance(self.flow_status, Unset):
            flow_status = UNSET
        else:
            flow_status = self.flow_status

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "outcome": outcome,
            }
        )
        if flow_id is not UNSET:
            field_dict["flow_id"] = flow_id
        if flow_status is not UNSET:
            field_dict["flow_status"] = flow_status

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        outcome = d.pop("outcome")

        def _parse_flow_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        flow_id = _parse_flow_id(d.pop("flow_id", UNSET))

        def _parse_flow_status(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        flow_status = _parse_flow_status(d.pop("flow_status", UNSET))

        last_fire_shown = cls(
            at=at,
            outcome=outcome,
            flow_id=flow_id,
            flow_status=flow_status,
        )

        last_fire_shown.additional_properties = d
        return last_fire_shown

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
