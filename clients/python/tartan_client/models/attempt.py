from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.attempt_outcome import AttemptOutcome
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.delay_parts import DelayParts


T = TypeVar("T", bound="Attempt")


@_attrs_define
class Attempt:
    """One call of a step endpoint.

    Attributes:
        number (int):
        started_at (datetime.datetime):
        delay (DelayParts | None | Unset):
        ended_at (datetime.datetime | None | Unset):
        error (None | str | Unset):
        hastened_at (datetime.datetime | None | Unset): When a request cut that wait short (docs/retries.md, "Retry
            now").
        http_status (int | None | Unset):
        memo (bool | Unset): Answered from the memo, without calling the step.
        outcome (AttemptOutcome | None | Unset):
        retry_after_ms (int | None | Unset): The response's `Retry-After`, in ms, when it had one.
    """

    number: int
    started_at: datetime.datetime
    delay: DelayParts | None | Unset = UNSET
    ended_at: datetime.datetime | None | Unset = UNSET
    error: None | str | Unset = UNSET
    hastened_at: datetime.datetime | None | Unset = UNSET
    http_status: int | None | Unset = UNSET
    memo: bool | Unset = UNSET
    outcome: AttemptOutcome | None | Unset = UNSET
    retry_after_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.delay_parts import DelayParts

        number = self.number

        started_at = self.started_at.isoformat()

        delay: dict[str, Any] | None | Unset
        if isinstance(self.delay, Unset):
            delay = UNSET
        elif isinstance(self.delay, DelayParts):
            delay = self.delay.to_dict()
        else:
            delay = self.delay

        ended_at: None | str | Unset
        if isinstance(self.ended_at, Unset):
            ended_at = UNSET
        elif isinstance(self.ended_at, datetime.datetime):
            ended_at = self.ended_at.isoformat()
        else:
            ended_at = self.ended_at

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        hastened_at: None | str | Unset
        if isinstance(self.hastened_at, Unset):
            hastened_at = UNSET
        elif isinstance(self.hastened_at, datetime.datetime):
            hastened_at = self.hastened_at.isoformat()
        else:
            hastened_at = self.hastened_at

        http_status: int | None | Unset
        if isinstance(self.http_status, Unset):
            http_status = UNSET
        else:
            http_status = self.http_status

        memo = self.memo

        outcome: None | str | Unset
        if isinstance(self.outcome, Unset):
            outcome = UNSET
        elif isinstance(self.outcome, AttemptOutcome):
            outcome = self.outcome.value
        else:
            outcome = self.outcome

        retry_after_ms: int | None | Unset
        if isinstance(self.retry_after_ms, Unset):
            retry_after_ms = UNSET
        else:
            retry_after_ms = self.retry_after_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "number": number,
                "started_at": started_at,
            }
        )
        if delay is not UNSET:
            field_dict["delay"] = delay
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at
        if error is not UNSET:
            field_dict["error"] = error
        if hastened_at is not UNSET:
            field_dict["hastened_at"] = hastened_at
        if http_status is not UNSET:
            field_dict["http_status"] = http_status
        if memo is not UNSET:
            field_dict["memo"] = memo
        if outcome is not UNSET:
            field_dict["outcome"] = outcome
        if retry_after_ms is not UNSET:
            field_dict["retry_after_ms"] = retry_after_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.delay_parts import DelayParts

        d = dict(src_dict)
        number = d.pop("number")

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        def _parse_delay(data: object) -> DelayParts | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                delay_type_0 = DelayParts.from_dict(data)

                return delay_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DelayParts | None | Unset, data)

        delay = _parse_delay(d.pop("delay", UNSET))

        def _parse_ended_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ended_at_type_0 = datetime.datetime.fromisoformat(data)

                return ended_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ended_at = _parse_ended_at(d.pop("ended_at", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_hastened_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                hastened_at_type_0 = datetime.datetime.fromisoformat(data)

                return hastened_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        hastened_at = _parse_hastened_at(d.pop("hastened_at", UNSET))

        def _parse_http_status(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        http_status = _parse_http_status(d.pop("http_status", UNSET))

        memo = d.pop("memo", UNSET)

        def _parse_outcome(data: object) -> AttemptOutcome | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                outcome_type_0 = AttemptOutcome(data)

                return outcome_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AttemptOutcome | None | Unset, data)

        outcome = _parse_outcome(d.pop("outcome", UNSET))

        def _parse_retry_after_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        retry_after_ms = _parse_retry_after_ms(d.pop("retry_after_ms", UNSET))

        attempt = cls(
            number=number,
            started_at=started_at,
            delay=delay,
            ended_at=ended_at,
            error=error,
            hastened_at=hastened_at,
            http_status=http_status,
            memo=memo,
            outcome=outcome,
            retry_after_ms=retry_after_ms,
        )

        attempt.additional_properties = d
        return attempt

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
