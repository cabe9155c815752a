from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.retry_state import RetryState
from ..models.work_status import WorkStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.attempt import Attempt
    from ..models.work_state_inputs import WorkStateInputs
    from ..models.work_state_outputs_type_0 import WorkStateOutputsType0


T = TypeVar("T", bound="WorkState")


@_attrs_define
class WorkState:
    """One work item: one call of the step endpoint and its retries, identified by
    its receipt token.

        Attributes:
            attempts (list[Attempt]):
            inputs (WorkStateInputs): The item's own inputs: its for_each elements and meta inputs. The
                rest of what it is called with is its step's `inputs`, held once
                for all of its items (`FlowState::item_inputs`).
            retry_count (int):
            status (WorkStatus):
            accepted_at (datetime.datetime | None | Unset): When an async step accepted the running attempt: no call is in
                flight
                until its webhook (or a retry) comes.
            children (list[str] | Unset): A flow step's item: the ids of the child flows it ran, one per
                attempt, the current one last (docs/steps.md, "Sub-flows").
            children_not_started (list[str] | Unset): A flow step's item: the ids given to children that never started
                (the item ended while its call waited for a place in
                `TARTAN_MAX_ACTIVE_FLOWS`), moved here from `children`. No flow has
                them, but for a child another process started and stopped at once
                as the item ended.
            compensation (list[Attempt] | Unset): Calls of the step's compensate endpoint for this item.
            completed_at (datetime.datetime | None | Unset):
            deadline_at (datetime.datetime | None | Unset): The step total timeout's deadline for this item, set at its
                first attempt.
            deferred_ms (int | Unset): How long the item waited for its unhealthy step after its first
                attempt, in ms: left out of its retry budget.
            deferred_since (datetime.datetime | None | Unset): Since when the item has waited for its unhealthy step
                (`dispatch_deferred`; docs/operating.md, "Health gates dispatch").
            error (None | str | Unset):
            inactive_until (datetime.datetime | None | Unset): An accepted async call fails as inactive unless its webhook
                or a
                heartbeat arrives before this.
            index (int | Unset): Position in the for_each expansion (Cartesian product order).
            late_results (list[int] | Unset): Attempts of the step endpoint a late result was recorded for: a
                step that posts its result again and again is recorded once.
            next_retry_at (datetime.datetime | None | Unset):
            outputs (None | Unset | WorkStateOutputsType0):
            problem (Any | Unset):
            retry_state (None | RetryState | Unset):
            started_at (datetime.datetime | None | Unset):
    """

    attempts: list[Attempt]
    inputs: WorkStateInputs
    retry_count: int
    status: WorkStatus
    accepted_at: datetime.datetime | None | Unset = UNSET
    children: list[str] | Unset = UNSET
    children_not_started: list[str] | Unset = UNSET
    compensation: list[Attempt] | Unset = UNSET
    completed_at: datetime.datetime | None | Unset = UNSET
    deadline_at: datetime.datetime | None | Unset = UNSET
    deferred_ms: int | Unset = UNSET
    deferred_since: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    inactive_until: datetime.datetime | None | Unset = UNSET
    index: int | Unset = UNSET
    late_results: list[int] | Unset = UNSET
    next_retry_at: datetime.datetime | None | Unset = UNSET
    outputs: None | Unset | WorkStateOutputsType0 = UNSET
    problem: Any | Unset = UNSET
    retry_state: None | RetryState | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.work_state_outputs_type_0 import WorkStateOutputsType0

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)

        inputs = self.inputs.to_dict()

        retry_count = self.retry_count

        status = self.status.value

        accepted_at: None | str | Unset
        if isinstance(self.accepted_at, Unset):
            accepted_at = UNSET
        elif isinstance(self.accepted_at, datetime.datetime):
            accepted_at = self.accepted_at.isoformat()
        else:
            accepted_at = self.accepted_at

        children: list[str] | Unset = UNSET
        if not isinstance(self.children, Unset):
            children = self.children

        children_not_started: list[str] | Unset = UNSET
        if not isinstance(self.children_not_started, Unset):
            children_not_started = self.children_not_started

        compensation: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.compensation, Unset):
            compensation = []
            for compensation_item_data in self.compensation:
                compensation_item = compensation_item_data.to_dict()
                compensation.append(compensation_item)

        completed_at: None | str | Unset
        if isinstance(self.completed_at, Unset):
            completed_at = UNSET
        elif isinstance(self.completed_at, datetime.datetime):
            completed_at = self.completed_at.isoformat()
        else:
            completed_at = self.completed_at

        deadline_at: None | str | Unset
        if isinstance(self.deadline_at, Unset):
            deadline_at = UNSET
        elif isinstance(self.deadline_at, datetime.datetime):
            deadline_at = self.deadline_at.isoformat()
        else:
            deadline_at = self.deadline_at

        deferred_ms = self.deferred_ms

        deferred_since: None | str | Unset
        if isinstance(self.deferred_since, Unset):
            deferred_since = UNSET
        elif isinstance(self.deferred_since, datetime.datetime):
            deferred_since = self.deferred_since.isoformat()
        else:
            deferred_since = self.deferred_since

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        inactive_until: None | str | Unset
        if isinstance(self.inactive_until, Unset):
            inactive_until = UNSET
        elif isinstance(self.inactive_until, datetime.datetime):
            inactive_until = self.inactive_until.isoformat()
        else:
            inactive_until = self.inactive_until

        index = self.index

        late_results: list[int] | Unset = UNSET
        if not isinstance(self.late_results, Unset):
            late_results = self.late_results

        next_retry_at: None | str | Unset
        if isinstance(self.next_retry_at, Unset):
            next_retry_at = UNSET
        elif isinstance(self.next_retry_at, datetime.datetime):
            next_retry_at = self.next_retry_at.isoformat()
        else:
            next_retry_at = self.next_retry_at

        outputs: dict[str, Any] | None | Unset
        if isinstance(self.outputs, Unset):
            outputs = UNSET
        elif isinstance(self.outputs, WorkStateOutputsType0):
            outputs = self.outputs.to_dict()
        else:
            outputs = self.outputs

        problem = self.problem

        retry_state: None | str | Unset
        if isinstance(self.retry_state, Unset):
            retry_state = UNSET
        elif isinstance(self.retry_state, RetryState):
            retry_state = self.retry_state.value
        else:
            retry_state = self.retry_state

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempts": attempts,
                "inputs": inputs,
                "retry_count": retry_count,
                "status": status,
            }
        )
        if accepted_at is not UNSET:
            field_dict["accepted_at"] = accepted_at
        if children is not UNSET:
            field_dict["children"] = children
        if children_not_started is not UNSET:
            field_dict["children_not_started"] = children_not_started
        if compensation is not UNSET:
            field_dict["compensation"] = compensation
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if deadline_at is not UNSET:
            field_dict["deadline_at"] = deadline_at
        if deferred_ms is not UNSET:
            field_dict["deferred_ms"] = deferred_ms
        if deferred_since is not UNSET:
            field_dict["deferred_since"] = deferred_since
        if error is not UNSET:
            field_dict["error"] = error
        if inactive_until is not UNSET:
            field_dict["inactive_until"] = inactive_until
        if index is not UNSET:
            field_dict["index"] = index
        if late_results is not UNSET:
            field_dict["late_results"] = late_results
        if next_retry_at is not UNSET:
            field_dict["next_retry_at"] = next_retry_at
        if outputs is not UNSET:
            field_dict["outputs"] = outputs
        if problem is not UNSET:
            field_dict["problem"] = problem
        if retry_state is not UNSET:
            field_dict["retry_state"] = retry_state
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.attempt import Attempt
        from ..models.work_state_inputs import WorkStateInputs
        from ..models.work_state_outputs_type_0 import WorkStateOutputsType0

        d = dict(src_dict)
        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in _attempts:
            attempts_item = Attempt.from_dict(attempts_item_data)

            attempts.append(attempts_item)

        inputs = WorkStateInputs.from_dict(d.pop("inputs"))

        retry_count = d.pop("retry_count")

        status = WorkStatus(d.pop("status"))

        def _parse_accepted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                accepted_at_type_0 = datetime.datetime.fromisoformat(data)

                return accepted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        accepted_at = _parse_accepted_at(d.pop("accepted_at", UNSET))

        children = cast(list[str], d.pop("children", UNSET))

        children_not_started = cast(list[str], d.pop("children_not_started", UNSET))

        _compensation = d.pop("compensation", UNSET)
        compensation: list[Attempt] | Unset = UNSET
        if _compensation is not UNSET:
            compensation = []
            for compensation_item_data in _compensation:
                compensation_item = Attempt.from_dict(compensation_item_data)

                compensation.append(compensation_item)

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

        def _parse_deadline_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deadline_at_type_0 = datetime.datetime.fromisoformat(data)

                return deadline_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deadline_at = _parse_deadline_at(d.pop("deadline_at", UNSET))

        deferred_ms = d.pop("deferred_ms", UNSET)

        def _parse_deferred_since(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deferred_since_type_0 = datetime.datetime.fromisoformat(data)

                return deferred_since_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deferred_since = _parse_deferred_since(d.pop("deferred_since", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_inactive_until(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                inactive_until_type_0 = datetime.datetime.fromisoformat(data)

                return inactive_until_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        inactive_until = _parse_inactive_until(d.pop("inactive_until", UNSET))

        index = d.pop("index", UNSET)

        late_results = cast(list[int], d.pop("late_results", UNSET))

        def _parse_next_retry_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_retry_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_retry_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_retry_at = _parse_next_retry_at(d.pop("next_retry_at", UNSET))

        def _parse_outputs(data: object) -> None | Unset | WorkStateOutputsType0:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                outputs_type_0 = WorkStateOutputsType0.from_dict(data)

                return outputs_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WorkStateOutputsType0, data)

        outputs = _parse_outputs(d.pop("outputs", UNSET))

        problem = d.pop("problem", UNSET)

        def _parse_retry_state(data: object) -> None | RetryState | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retry_state_type_0 = RetryState(data)

                return retry_state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RetryState | Unset, data)

        retry_state = _parse_retry_state(d.pop("retry_state", UNSET))

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

        work_state = cls(
            attempts=attempts,
            inputs=inputs,
            retry_count=retry_count,
            status=status,
            accepted_at=accepted_at,
            children=children,
            children_not_started=children_not_started,
            compensation=compensation,
            completed_at=completed_at,
            deadline_at=deadline_at,
            deferred_ms=deferred_ms,
            deferred_since=deferred_since,
            error=error,
            inactive_until=inactive_until,
            index=index,
            late_results=late_results,
            next_retry_at=next_retry_at,
            outputs=outputs,
            problem=problem,
            retry_state=retry_state,
            started_at=started_at,
        )

        work_state.additional_properties = d
        return work_state

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
