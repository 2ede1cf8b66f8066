"""Composition: one server made of others (docs/composition.md).

    mcpkit serve examples/composition.py
    mcpkit list "mcpkit serve examples/composition.py"

``weather`` is mounted (live: a tool it adds later shows up, with list_changed, and its own
policy keeps applying); ``units`` is included (a copy, taken now). Tool names come out as
``weather_forecast`` and ``units_to_celsius``; the weather resource as ``weather://weather/current``.
"""

from __future__ import annotations

from mcpkit import Server

weather = Server("weather")


@weather.tool(read_only=True, open_world=False, rate_limit="30/min")
def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return f"Sunny in {city}, 21 °C."


@weather.resource("weather://current", mime_type="text/plain")
def current() -> str:
    """The weather now."""
    return "Clear, 18 °C."


@weather.prompt
def plan_trip(city: str) -> str:
    """Plan a day out, weather permitting."""
    return f"Check the forecast for {city} and plan a day out."


units = Server("units")


@units.tool(read_only=True, open_world=False)
def to_celsius(fahrenheit: float) -> float:
    """Fahrenheit to Celsius."""
    return round((fahrenheit - 32) * 5 / 9, 2)


server = Server("travel", instructions="Weather and unit conversion, from two servers in one.")
server.mount(weather, prefix="weather")
server.include(units, prefix="units")

if __name__ == "__main__":
    server.run()
