"""A small server with one of everything, to try the tools on: ``mcpkit dev examples/weather.py``.

    mcpkit list examples/weather.py
    mcpkit call examples/weather.py forecast city=Oslo days=2
    mcpkit read examples/weather.py weather://stations/oslo
    mcpkit prompt examples/weather.py packing city=Oslo
"""

from __future__ import annotations

from typing import Literal

from mcpkit import Context, Server, ToolError

server = Server("weather", "1.0", instructions="Forecasts for a few cities.")

HIGHS = {"oslo": [4.5, 6.0, 3.2, 5.1, 7.0], "paris": [14.0, 15.5, 13.2, 12.8, 16.1], "lima": [22.3, 23.0, 22.8, 21.9, 22.5]}


@server.tool(read_only=True, open_world=False)
async def forecast(ctx: Context, city: str, days: int = 3,
                   unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, list[float]]:
    """Daily high temperatures for a city.

    Args:
        city: Oslo, Paris or Lima.
        days: how many days, 1 to 5.
        unit: the temperature unit.
    """
    highs = HIGHS.get(city.lower())
    if highs is None:
        raise ToolError(f"no forecast for {city!r}; try one of: {', '.join(sorted(HIGHS))}")
    await ctx.info(f"forecast for {city}, {days} day(s)")
    for day in range(1, days + 1):
        await ctx.report_progress(day, days, f"day {day}")
    picked = highs[:days]
    if unit == "fahrenheit":
        picked = [round(h * 9 / 5 + 32, 1) for h in picked]
    return {"highs": picked}


@server.resource("weather://cities", mime_type="application/json")
def cities() -> str:
    """The cities with a forecast."""
    return '["oslo", "paris", "lima"]'


@server.resource_template("weather://stations/{city}", mime_type="text/plain")
def station(city: str) -> str:
    """The weather station of a city."""
    return f"Station {city.upper()}-01, reporting hourly."


@server.prompt
def packing(city: str, days: str = "3") -> str:
    """What to pack for a trip."""
    return f"Using the forecast tool for {city} over {days} days, suggest what to pack."


if __name__ == "__main__":
    server.run()
