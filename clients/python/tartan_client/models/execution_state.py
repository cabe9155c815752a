from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.step_status import StepStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.execution_state_inputs import ExecutionStateInputs
    from ..models.execution_state_outputs_type_0 import ExecutionStateOutputsType0
    from ..models.execution_state_work_items import ExecutionStateWorkItems


T = TypeVar("T", bound="ExecutionState")


@_attrs_define
class ExecutionState:
    """Progress of one plan step.

    Attributes:
        inputs (ExecutionStateInputs): Shared: a for_each step's inputs hold the whole array, and a
            decision that changes one of its items copies the execution.
        status (StepStatus):
        work_items (ExecutionStateWorkItems):
        completed_at (datetime.datetime | None | Unset):
        duration (int | None | Unset):
        error (None | str | Unset):
        outputs (ExecutionStateOutputsType0 | None | Unset):
        problem (Any | Unset):
        reason (None | str | Unset): Why the step was skipped.
        started_at (datetime.datetime | None | Unset):
        unsatisfied (list[str] | Unset): The inputs whose `required.match` could not be met (a skip's).
    """

    inputs: ExecutionStateInputs
    status: StepStatus
    work_items: ExecutionStateWorkItems
    completed_at: datetime.datetime | None | Unset = UNSET
    duration: int | None | Unset = UNSET
    error: None | str | Unset = UNSET
    outputs: ExecutionStateOutputsType0 | None | Unset = UNSET
    problem: Any | Unset = UNSET
    reason: None | str | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    unsatisfied: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.execution_state_outputs_type_0 import ExecutionStateOutputsType0

        inputs = self.inputs.to_dict()

        status = self.status.value

        work_items = self.work_items.to_dict()

        completed_at: None | str | Unset
        if isinstance(self.completed_at, Unset):
            completed_at = UNSET
        elif isinstance(self.completed_at, datetime.datetime):
            completed_at = self.completed_at.isoformat()
        else:
            completed_at = self.completed_at

        duration: int | None | Unset
        if isinstance(self.duration, Unset):
            duration = UNSET
        else:
            duration = self.duration

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        outputs: dict[str, Any] | None | Unset
        if isinstance(self.outputs, Unset):
            outputs = UNSET
        elif isinstance(self.outputs, ExecutionStateOutputsType0):
            outputs = self.outputs.to_dict()
        else:
            outputs = self.outputs

        problem = self.problem

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        unsatisfied: list[str] | Unset = UNSET
        if not isinstance(self.unsatisfied, Unset):
            unsatisfied = self.unsatisfied

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "inputs": inputs,
                "status": status,
                "work_items": work_items,
            }
        )
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if duration is not UNSET:
            field_dict["duration"] = duration
        if error is not UNSET:
            field_dict["error"] = error
        if outputs is not UNSET:
            field_dict["outputs"] = outputs
        if problem is not UNSET:
            field_dict["problem"] = problem
        if reason is not UNSET:
            field_dict["reason"] = reason
        if started_at is not UNSET:
            field_dict["started_at"] = started_at
        if unsatisfied is not UNSET:
            field_dict["unsatisfied"] = unsatisfied

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.execution_state_inputs import ExecutionStateInputs
        from ..models.execution_state_outputs_type_0 import ExecutionStateOutputsType0
        from ..models.execution_state_work_items import ExecutionStateWorkItems

        d = dict(src_dict)
        inputs = ExecutionStateInputs.from_dict(d.pop("inputs"))

        status = StepStatus(d.pop("status"))

        work_items = ExecutionStateWorkItems.from_dict(d.pop("work_items"))

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

        def _parse_duration(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration = _parse_duration(d.pop("duration", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_outputs(data: object) -> ExecutionStateOutputsType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                outputs_type_0 = ExecutionStateOutputsType0.from_dict(data)

                return outputs_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ExecutionStateOutputsType0 | None | Unset, data)

        outputs = _parse_outputs(d.pop("outputs", UNSET))

        problem = d.pop("problem", UNSET)

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        unsatisfied = cast(list[str], d.pop("unsatisfied", UNSET))

        execution_state = cls(
            inputs=inputs,
            status=status,
            work_items=work_items,
            completed_at=completed_at,
            duration=duration,
            error=error,
            outputs=outputs,
            problem=problem,
            reason=reason,
            started_at=started_at,
            unsatisfied=unsatisfied,
        )

        execution_state.additional_properties = d
        return execution_state

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
