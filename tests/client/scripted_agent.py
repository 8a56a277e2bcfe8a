"""The openai-agents side of tests/client/test_agents_session.py: a scripted model (no network) and a
two-turn conversation held with it. A module of its own so that the test module imports openai-agents
when a test runs, not when it is collected: the import takes seconds, which collecting would cost every
xdist worker of every run."""

from agents import Agent, ModelResponse, RunConfig, Runner, SQLiteSession, Usage, function_tool
from agents.memory import Session as SessionProtocol
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

__all__ = ["SQLiteSession", "SessionProtocol", "converse"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 24°C, sunny"


def text_message(id_: str, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=id_, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


class ScriptedModel(Model):
    """Answers the first call with a call of get_weather for Lisbon, then each call with the next of
    `answers`, and remembers the input it was given."""

    def __init__(self, answers: tuple[str, str]):
        self.responses = [
            [ResponseFunctionToolCall(id="fc_1", call_id="call_weather_1", name="get_weather",
                                      arguments='{"city": "Lisbon"}', type="function_call", status="completed")],
            [text_message("msg_1", answers[0])],
            [text_message("msg_2", answers[1])],
        ]
        self.inputs = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kwargs):
        self.inputs.append(input)
        return ModelResponse(output=self.responses.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


async def converse(session, questions: tuple[str, str], answers: tuple[str, str]):
    """Two turns: the first question answered with a tool call, then the follow-up."""
    model = ScriptedModel(answers)
    agent = Agent(name="weather", instructions="You are a weather assistant.", model=model, tools=[get_weather])
    config = RunConfig(tracing_disabled=True)
    first = await Runner.run(agent, questions[0], session=session, run_config=config)
    second = await Runner.run(agent, questions[1], session=session, run_config=config)
    return model, first.final_output, second.final_output
