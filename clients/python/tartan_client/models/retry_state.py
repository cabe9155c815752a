from enum import StrEnum


class RetryState(StrEnum):
    DEADLINE = "deadline"
    FLOW_ENDED = "flow_ended"
    MAX_ATTEMPTS = "max_attempts"
    PERMANENT = "permanent"
    STEP_LIMIT = "step_limit"

    def __str__(self) -> str:
        return str(self.value)
