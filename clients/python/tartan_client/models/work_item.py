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
    from ..models.lane_wait_shown import LaneWaitShown


T = TypeVar("T", bound="WorkItem")


@_attrs_define
class WorkItem:
    """A work item, flat, with where it belongs (docs/work-items.md): its
    bookkeeping, without its inputs and outputs (those are in the flow's
    state), so that a page of items is small whatever the steps exchange.

        Attributes:
            attempt (int):
            attempts (list[Attempt]):
            flow_id (str):
            retry_count (int):
            status (WorkStatus):
            step_id (str):
            token (str):
            accepted_at (datetime.datetime | None | Unset):
            compensation (list[Attempt] | Unset):
            completed_at (datetime.datetime | None | Unset):
            deadline_at (datetime.datetime | None | Unset):
            error (None | str | Unset):
            inactive_until (datetime.datetime | None | Unset):
            index (int | Unset):
            lane (LaneWaitShown | None | Unset):
            last_error (None | str | Unset):
            next_retry_at (datetime.datetime | None | Unset):
            problem (Any | Unset):
            retry_state (None | RetryState | Unset):
            started_at (datetime.datetime | None | Unset):
    """

    attempt: int
    attempts: list[Attempt]
    flow_id: str
    retry_count: int
    status: WorkStatus
    step_id: str
    token: str
    accepted_at: datetime.datetime | None | Unset = UNSET
    compensation: list[Attempt] | Unset = UNSET
    completed_at: datetime.datetime | None | Unset = UNSET
    deadline_at: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    inactive_until: datetime.datetime | None | Unset = UNSET
    index: int | Unset = UNSET
    lane: LaneWaitShown | None | Unset = UNSET
    last_error: None | str | Unset = UNSET
    next_retry_at: datetime.datetime | None | Unset = UNSET
    problem: Any | Unset = UNSET
    retry_state: None | RetryState | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.lane_wait_shown import LaneWaitShown

        attempt = self.attempt

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)

        flow_id = self.flow_id

        retry_count = self.retry_count

        status = self.status.value

        step_id = self.step_id

        token = self.token

        accepted_at: None | str | Unset
        if isinstance(self.accepted_at, Unset):
            accepted_at = UNSET
        elif isinstance(self.accepted_at, datetime.datetime):
            accepted_at = self.accepted_at.isoformat()
        else:
            accepted_at = self.accepted_at

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

        lane: dict[str, Any] | None | Unset
        if isinstance(self.lane, Unset):
            lane = UNSET
        elif isinstance(self.lane, LaneWaitShown):
            lane = self.lane.to_dict()
        else:
            lane = self.lane

        last_error: None | str | Unset
        if isinstance(self.last_error, Unset):
            last_error = UNSET
        else:
            last_error = self.last_error

        next_retry_at: None | str | Unset
        if isinstance(self.next_retry_at, Unset):
            next_retry_at = UNSET
        elif isinstance(self.next_retry_at, datetime.datetime):
            next_retry_at = self.next_retry_at.isoformat()
        else:
            next_retry_at = self.next_retry_at

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
                "attempt": attempt,
                "attempts": attempts,
                "flow_id": flow_id,
                "retry_count": retry_count,
                "status": status,
                "step_id": step_id,
                "token": token,
            }
        )
        if accepted_at is not UNSET:
            field_dict["accepted_at"] = accepted_at
        if compensation is not UNSET:
            field_dict["compensation"] = compensation
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if deadline_at is not UNSET:
            field_dict["deadline_at"] = deadline_at
        if error is not UNSET:
            field_dict["error"] = error
        if inactive_until is not UNSET:
            field_dict["inactive_until"] = inactive_until
        if index is not UNSET:
            field_dict["index"] = index
        if lane is not UNSET:
            field_dict["lane"] = lane
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if next_retry_at is not UNSET:
            field_dict["next_retry_at"] = next_retry_at
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
        from ..models.lane_wait_shown import LaneWaitShown

        d = dict(src_dict)
        attempt = d.pop("attempt")

        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in _attempts:
            attempts_item = Attempt.from_dict(attempts_item_data)

            attempts.append(attempts_item)

        flow_id = d.pop("flow_id")

        retry_count = d.pop("retry_count")

        status = WorkStatus(d.pop("status"))

        step_id = d.pop("step_id")

        token = d.pop("token")

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

        def _parse_lane(data: object) -> LaneWaitShown | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                lane_type_0 = LaneWaitShown.from_dict(data)

                return lane_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LaneWaitShown | None | Unset, data)

        lane = _parse_lane(d.pop("lane", UNSET))

        def _parse_last_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        last_error = _parse_last_error(d.pop("last_error", UNSET))

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

        work_item = cls(
            attempt=attempt,
            attempts=attempts,
            flow_id=flow_id,
            retry_count=retry_count,
            status=status,
            step_id=step_id,
            token=token,
            accepted_at=accepted_at,
            compensation=compensation,
            completed_at=completed_at,
            deadline_at=deadline_at,
            error=error,
            inactive_until=inactive_until,
            index=index,
            lane=lane,
            last_error=last_error,
            next_retry_at=next_retry_at,
            problem=problem,
            retry_state=retry_state,
            started_at=started_at,
        )

        work_item.additional_properties = d
        return work_item

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
