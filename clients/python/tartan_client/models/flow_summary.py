from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.flow_status import FlowStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.flow_summary_labels import FlowSummaryLabels


T = TypeVar("T", bound="FlowSummary")


@_attrs_define
class FlowSummary:
    """A flow in a list.

    Attributes:
        id (str):
        status (FlowStatus):
        timestamp (datetime.datetime): When the flow took its status, as Argyll's: its end, or its start
            while it runs.
        completed_at (datetime.datetime | None | Unset):
        created_at (datetime.datetime | None | Unset): The query form only: when it was created, last changed, and
            ended.
        error (None | str | Unset):
        failed_steps (list[str] | Unset): The query form only: steps with a failed work item.
        goals (list[str] | Unset): The query form only: the flow's goals (absent for flows created
            before Tartan kept them with the flow).
        labels (FlowSummaryLabels | Unset):
        last_updated (datetime.datetime | None | Unset):
        running_steps (list[str] | Unset): The query form only: steps with a work item running or waiting to
            run (a first attempt, a retry, a wait for an unhealthy step).
    """

    id: str
    status: FlowStatus
    timestamp: datetime.datetime
    completed_at: datetime.datetime | None | Unset = UNSET
    created_at: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    failed_steps: list[str] | Unset = UNSET
    goals: list[str] | Unset = UNSET
    labels: FlowSummaryLabels | Unset = UNSET
    last_updated: datetime.datetime | None | Unset = UNSET
    running_steps: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        status = self.status.value

        timestamp = self.timestamp.isoformat()

        completed_at: None | str | Unset
        if isinstance(self.completed_at, Unset):
            completed_at = UNSET
        elif isinstance(self.completed_at, datetime.datetime):
            completed_at = self.completed_at.isoformat()
        else:
            completed_at = self.completed_at

        created_at: None | str | Unset
        if isinstance(self.created_at, Unset):
            created_at = UNSET
        elif isinstance(self.created_at, datetime.datetime):
            created_at = self.created_at.isoformat()
        else:
            created_at = self.created_at

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        failed_steps: list[str] | Unset = UNSET
        if not isinstance(self.failed_steps, Unset):
            failed_steps = self.failed_steps

        goals: list[str] | Unset = UNSET
        if not isinstance(self.goals, Unset):
            goals = self.goals

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        last_updated: None | str | Unset
        if isinstance(self.last_updated, Unset):
            last_updated = UNSET
        elif isinstance(self.last_updated, datetime.datetime):
            last_updated = self.last_updated.isoformat()
        else:
            last_updated = self.last_updated

        running_steps: list[str] | Unset = UNSET
        if not isinstance(self.running_steps, Unset):
            running_steps = self.running_steps

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "status": status,
                "timestamp": timestamp,
            }
        )
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if error is not UNSET:
            field_dict["error"] = error
        if failed_steps is not UNSET:
            field_dict["failed_steps"] = failed_steps
        if goals is not UNSET:
            field_dict["goals"] = goals
        if labels is not UNSET:
            field_dict["labels"] = labels
        if last_updated is not UNSET:
            field_dict["last_updated"] = last_updated
        if running_steps is not UNSET:
            field_dict["running_steps"] = running_steps

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.flow_summary_labels import FlowSummaryLabels

        d = dict(src_dict)
        id = d.pop("id")

        status = FlowStatus(d.pop("status"))

        timestamp = datetime.datetime.fromisoformat(d.pop("timestamp"))

        def _parse_completed_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                completed_at_type_0 = datetime.datetime.fromisoformat(data)

                return completed_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        completed_at = _parse_completed_at(d.pop("completed_at", UNSET))

        def _parse_created_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                created_at_type_0 = datetime.datetime.fromisoformat(data)

                return created_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        created_at = _parse_created_at(d.pop("created_at", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        failed_steps = cast(list[str], d.pop("failed_steps", UNSET))

        goals = cast(list[str], d.pop("goals", UNSET))

        _labels = d.pop("labels", UNSET)
        labels: FlowSummaryLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = FlowSummaryLabels.from_dict(_labels)

        def _parse_last_updated(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_updated_type_0 = datetime.datetime.fromisoformat(data)

                return last_updated_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_updated = _parse_last_updated(d.pop("last_updated", UNSET))

        running_steps = cast(list[str], d.pop("running_steps", UNSET))

        flow_summary = cls(
            id=id,
            status=status,
            timestamp=timestamp,
            completed_at=completed_at,
            created_at=created_at,
            error=error,
            failed_steps=failed_steps,
            goals=goals,
            labels=labels,
            last_updated=last_updated,
            running_steps=running_steps,
        )

        flow_summary.additional_properties = d
        return flow_summary

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
