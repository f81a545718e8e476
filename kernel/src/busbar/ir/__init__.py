"""The intermediate representation shared by all six protocol dialects (see ``busbar.ir.model``)."""
from busbar.ir.model import (  # noqa: F401
    BlockDelta, BlockStart, BlockStop, DocumentBlock, ImageBlock, IrBlock, IrMessage, IrRequest,
    IrResponse, IrTool, MessageDelta, MessageStart, MessageStop, ReasoningAsk, StopReason,
    StreamError, StreamEvent, TextBlock, ThinkingBlock, ToolChoice, ToolResultBlock, ToolUseBlock, Usage,
)
