from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.flow_status import FlowStatus
from ..models.on_timeout import OnTimeout
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.concurrency import Concurrency
    from ..models.execution_plan import ExecutionPlan
    from ..models.flow_state_attributes import FlowStateAttributes
    from ..models.flow_state_executions import FlowStateExecutions
    from ..models.flow_state_input_deadlines import FlowStateInputDeadlines
    from ..models.flow_state_labels import FlowStateLabels
    from ..models.flow_trace import FlowTrace
    from ..models.parent_link import ParentLink


T = TypeVar("T", bound="FlowState")


@_attrs_define
class FlowState:
    """The whole state of a flow, in Argyll's shape plus Tartan's additions.

    Attributes:
        attributes (FlowStateAttributes):
        created_at (datetime.datetime):
        executions (FlowStateExecutions):
        id (str):
        last_updated (datetime.datetime):
        max_step_attempts (int): Cap on the attempts of all work items together.
        plan (ExecutionPlan): The compiled plan of a flow, in Argyll's shape. Its steps carry their
            typed policies: a plan read back from storage parses them again, once.
        status (FlowStatus):
        completed_at (datetime.datetime | None | Unset):
        concurrency (Concurrency | None | Unset):
        data_bytes (int | Unset): The bytes of JSON of the flow's initial inputs and of every output
            its work items returned: what `TARTAN_MAX_FLOW_BYTES` bounds
            (docs/errors.md, "A flow's size"). Kept by `apply`.
        deactivated_at (datetime.datetime | None | Unset):
        deadline_at (datetime.datetime | None | Unset):
        error (None | str | Unset):
        input_deadlines (FlowStateInputDeadlines | Unset): Pending steps waiting for an optional input until a deadline
            (`step_waiting`): when the flow must be woken to decide on them.
        killed (bool | Unset): Cancelled without compensation (`cancel?compensate=false`): a call
            that succeeds after the cancel is not compensated either.
        labels (FlowStateLabels | Unset):
        metadata (None | ParentLink | Unset):
        on_timeout (None | OnTimeout | Unset):
        priority (int | Unset): Where its calls and its turn wait, higher first
            (docs/concurrency.md, "Priority").
        problem (Any | Unset):
        queued (bool | Unset): Waiting for its turn on its key: no step starts until
            `flow_admitted` clears it.
        queued_at (datetime.datetime | None | Unset): When it joined its key's line (its start, its delayed start's
            time,
            or its retry): a turn given for an earlier place in the line is not
            its turn now (`machine::Command::Admit`).
        retried_at (datetime.datetime | None | Unset): When the flow was last retried: its timeout counts from then
            (from `created_at` before any retry).
        starts_at (datetime.datetime | None | Unset): A delayed flow's start time, while it waits for it (no step starts
            before; `flow_released` clears it): docs/schedules.md, "Delayed starts".
        trace (FlowTrace | None | Unset):
    """

    attributes: FlowStateAttributes
    created_at: datetime.datetime
    executions: FlowStateExecutions
    id: str
    last_updated: datetime.datetime
    max_step_attempts: int
    plan: ExecutionPlan
    status: FlowStatus
    completed_at: datetime.datetime | None | Unset = UNSET
    concurrency: Concurrency | None | Unset = UNSET
    data_bytes: int | Unset = UNSET
    deactivated_at: datetime.datetime | None | Unset = UNSET
    deadline_at: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    input_deadlines: FlowStateInputDeadlines | Unset = UNSET
    killed: bool | Unset = UNSET
    labels: FlowStateLabels | Unset = UNSET
    metadata: None | ParentLink | Unset = UNSET
    on_timeout: None | OnTimeout | Unset = UNSET
    priority: int | Unset = UNSET
    problem: Any | Unset = UNSET
    queued: bool | Unset = UNSET
    queued_at: datetime.datetime | None | Unset = UNSET
    retried_at: datetime.datetime | None | Unset = UNSET
    starts_at: datetime.datetime | None | Unset = UNSET
    trace: FlowTrace | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.concurrency import Concurrency
        from ..models.flow_trace import FlowTrace
        from ..models.parent_link import ParentLink

        attributes = self.attributes.to_dict()

        created_at = self.created_at.isoformat()

        executions = self.executions.to_dict()

        id = self.id

        last_updated = self.last_updated.isoformat()

        max_step_attempts = self.max_step_attempts

        plan = self.plan.to_dict()

        status = self.status.value

        completed_at: None | str | Unset
        if isinstance(self.completed_at, Unset):
            completed_at = UNSET
        elif isinstance(self.completed_at, datetime.datetime):
            completed_at = self.completed_at.isoformat()
        else:
            completed_at = self.completed_at

        concurrency: dict[str, Any] | None | Unset
        if isinstance(self.concurrency, Unset):
            concurrency = UNSET
        elif isinstance(self.concurrency, Concurrency):
            concurrency = self.concurrency.to_dict()
        else:
            concurrency = self.concurrency

        data_bytes = self.data_bytes

        deactivated_at: None | str | Unset
        if isinstance(self.deactivated_at, Unset):
            deactivated_at = UNSET
        elif isinstance(self.deactivated_at, datetime.datetime):
            deactivated_at = self.deactivated_at.isoformat()
        else:
            deactivated_at = self.deactivated_at

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

        input_deadlines: dict[str, Any] | Unset = UNSET
        if not isinstance(self.input_deadlines, Unset):
            input_deadlines = self.input_deadlines.to_dict()

        killed = self.killed

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, ParentLink):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        on_timeout: None | str | Unset
        if isinstance(self.on_timeout, Unset):
            on_timeout = UNSET
        elif isinstance(self.on_timeout, OnTimeout):
            on_timeout = self.on_timeout.value
        else:
            on_timeout = self.on_timeout

        priority = self.priority

        problem = self.problem

        queued = self.queued

        queued_at: None | str | Unset
        if isinstance(self.queued_at, Unset):
            queued_at = UNSET
        elif isinstance(self.queued_at, datetime.datetime):
            queued_at = self.queued_at.isoformat()
        else:
            queued_at = self.queued_at

        retried_at: None | str | Unset
        if isinstance(self.retried_at, Unset):
            retried_at = UNSET
        elif isinstance(self.retried_at, datetime.datetime):
            retried_at = self.retried_at.isoformat()
        else:
            retried_at = self.retried_at

        starts_at: None | str | Unset
        if isinstance(self.starts_at, Unset):
            starts_at = UNSET
        elif isinstance(self.starts_at, datetime.datetime):
            starts_at = self.starts_at.isoformat()
        else:
            starts_at = self.starts_at

        trace: dict[str, Any] | None | Unset
        if isinstance(self.trace, Unset):
            trace = UNSET
        elif isinstance(self.trace, FlowTrace):
            trace = self.trace.to_dict()
        else:
            trace = self.trace

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attributes": attributes,
                "created_at": created_at,
                "executions": executions,
                "id": id,
                "last_updated": last_updated,
                "max_step_attempts": max_step_attempts,
                "plan": plan,
                "status": status,
            }
        )
        if completed_at is not UNSET:
            field_dict["completed_at"] = completed_at
        if concurrency is not UNSET:
            field_dict["concurrency"] = concurrency
        if data_bytes is not UNSET:
            field_dict["data_bytes"] = data_bytes
        if deactivated_at is not UNSET:
            field_dict["deactivated_at"] = deactivated_at
        if deadline_at is not UNSET:
            field_dict["deadline_at"] = deadline_at
        if error is not UNSET:
            field_dict["error"] = error
        if input_deadlines is not UNSET:
            field_dict["input_deadlines"] = input_deadlines
        if killed is not UNSET:
            field_dict["killed"] = killed
        if labels is not UNSET:
            field_dict["labels"] = labels
        if metadata is not UNSET:
            field_dict["metadata"] = metadata
        if on_timeout is not UNSET:
            field_dict["on_timeout"] = on_timeout
        if priority is not UNSET:
            field_dict["priority"] = priority
        if problem is not UNSET:
            field_dict["problem"] = problem
        if queued is not UNSET:
            field_dict["queued"] = queued
        if queued_at is not UNSET:
            field_dict["queued_at"] = queued_at
        if retried_at is not UNSET:
            field_dict["retried_at"] = retried_at
        if starts_at is not UNSET:
            field_dict["starts_at"] = starts_at
        if trace is not UNSET:
            field_dict["trace"] = trace

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.concurrency import Concurrency
        from ..models.execution_plan import ExecutionPlan
        from ..models.flow_state_attributes import FlowStateAttributes
        from ..models.flow_state_executions import FlowStateExecutions
        from ..models.flow_state_input_deadlines import FlowStateInputDeadlines
        from ..models.flow_state_labels import FlowStateLabels
        from ..models.flow_trace import FlowTrace
        from ..models.parent_link import ParentLink

        d = dict(src_dict)
        attributes = FlowStateAttributes.from_dict(d.pop("attributes"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        executions = FlowStateExecutions.from_dict(d.pop("executions"))

        id = d.pop("id")

        last_updated = datetime.datetime.fromisoformat(d.pop("last_updated"))

        max_step_attempts = d.pop("max_step_attempts")

        plan = ExecutionPlan.from_dict(d.pop("plan"))

        status = FlowStatus(d.pop("status"))

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

        def _parse_concurrency(data: object) -> Concurrency | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                concurrency_type_0 = Concurrency.from_dict(data)

                return concurrency_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Concurrency | None | Unset, data)

        concurrency = _parse_concurrency(d.pop("concurrency", UNSET))

        data_bytes = d.pop("data_bytes", UNSET)

        def _parse_deactivated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deactivated_at_type_0 = datetime.datetime.fromisoformat(data)

                return deactivated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deactivated_at = _parse_deactivated_at(d.pop("deactivated_at", UNSET))

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

        _input_deadlines = d.pop("input_deadlines", UNSET)
        input_deadlines: FlowStateInputDeadlines | Unset
        if isinstance(_input_deadlines, Unset):
            input_deadlines = UNSET
        else:
            input_deadlines = FlowStateInputDeadlines.from_dict(_input_deadlines)

        killed = d.pop("killed", UNSET)

        _labels = d.pop("labels", UNSET)
        labels: FlowStateLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = FlowStateLabels.from_dict(_labels)

        def _parse_metadata(data: object) -> None | ParentLink | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = ParentLink.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ParentLink | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

        def _parse_on_timeout(data: object) -> None | OnTimeout | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_timeout_type_0 = OnTimeout(data)

                return on_timeout_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnTimeout | Unset, data)

        on_timeout = _parse_on_timeout(d.pop("on_timeout", UNSET))

        priority = d.pop("priority", UNSET)

        problem = d.pop("problem", UNSET)

        queued = d.pop("queued", UNSET)

        def _parse_queued_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                queued_at_type_0 = datetime.datetime.fromisoformat(data)

                return queued_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        queued_at = _parse_queued_at(d.pop("queued_at", UNSET))

        def _parse_retried_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                retried_at_type_0 = datetime.datetime.fromisoformat(data)

                return retried_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        retried_at = _parse_retried_at(d.pop("retried_at", UNSET))

        def _parse_starts_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                starts_at_type_0 = datetime.datetime.fromisoformat(data)

                return starts_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        starts_at = _parse_starts_at(d.pop("starts_at", UNSET))

        def _parse_trace(data: object) -> FlowTrace | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                trace_type_0 = FlowTrace.from_dict(data)

                return trace_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FlowTrace | None | Unset, data)

        trace = _parse_trace(d.pop("trace", UNSET))

        flow_state = cls(
            attributes=attributes,
            created_at=created_at,
            executions=executions,
            id=id,
            last_updated=last_updated,
            max_step_attempts=max_step_attempts,
            plan=plan,
            status=status,
            completed_at=completed_at,
            concurrency=concurrency,
            data_bytes=data_bytes,
            deactivated_at=deactivated_at,
            deadline_at=deadline_at,
            error=error,
            input_deadlines=input_deadlines,
            killed=killed,
            labels=labels,
            metadata=metadata,
            on_timeout=on_timeout,
            priority=priority,
            problem=problem,
            queued=queued,
            queued_at=queued_at,
            retried_at=retried_at,
            starts_at=starts_at,
            trace=trace,
        )

        flow_state.additional_properties = d
        return flow_state

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
