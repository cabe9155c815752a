from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WorkRetried")


@_attrs_define
class WorkRetried:
    """`POST /engine/flow/{id}/work/{token}/retry`'s answer.

    Attributes:
        flow_id (str):
        message (str):  Example: Retry started.
        status (str): The item's status now: `active`, its next attempt running (or
            `pending` if its step turned unhealthy, `skipped` if its predicate
            said so).
        step_id (str):
        token (str):
        was_due_at (datetime.datetime): When the retry had been scheduled.
        attempt (int | None | Unset): The attempt now running.
    """

    flow_id: str
    message: str
    status: str
    step_id: str
    token: str
    was_due_at: datetime.datetime
    attempt: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        flow_id = self.flow_id

        message = self.message

        status = self.status

        step_id = self.step_id

        token = self.token

        was_due_at = self.was_due_at.isoformat()

        attempt: int | None | Unset
        if isinstance(self.attempt, Unset):
            attempt = UNSET
        else:
            attempt = self.attempt

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "flow_id": flow_id,
                "message": message,
                "status": status,
                "step_id": step_id,
                "token": token,
                "was_due_at": was_due_at,
            }
        )
        if attempt is not UNSET:
            field_dict["attempt"] = attempt

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        flow_id = d.pop("flow_id")

        message = d.pop("message")

        status = d.pop("status")

        step_id = d.pop("step_id")

        token = d.pop("token")

        was_due_at = datetime.datetime.fromisoformat(d.pop("was_due_at"))

        def _parse_attempt(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        attempt = _parse_attempt(d.pop("attempt", UNSET))

        work_retried = cls(
            flow_id=flow_id,
            message=message,
            status=status,
            step_id=step_id,
            token=token,
            was_due_at=was_due_at,
            attempt=attempt,
        )

        work_retried.additional_properties = d
        return work_retried

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
