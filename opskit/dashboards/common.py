"""Shared building blocks for opskit's Grafana dashboards (grafanalib).

Every panel carries a link to its runbook; the runbook base URL is a parameter
of each dashboard's ``build()``. Panels are laid out left to right on Grafana's
24-column grid by :class:`Layout`.
"""

from __future__ import annotations

from typing import Any

from grafanalib.core import (
    Dashboard,
    GridPos,
    RowPanel,
    Stat,
    Table,
    Target,
    Template,
    Templating,
    Text,
    Time,
    TimeSeries,
)

#: Grafana 11 dashboard schema, set explicitly (grafanalib's default is 12)
SCHEMA_VERSION = 39
DEFAULT_RUNBOOK_BASE = "https://github.com/hanzoai/opskit/blob/main/runbooks"
DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
#: label selector every query starts from
CLUSTER = 'cluster=~"$cluster"'


def runbook_link(base: str, page: str) -> list[dict[str, Any]]:
    return [{"title": f"Runbook: {page}", "url": f"{base.rstrip('/')}/{page}.md",
             "targetBlank": True}]


def datasource_var() -> Template:
    return Template(name="datasource", label="Data source", query="prometheus",
                    type="datasource", default="Prometheus")


def query_var(name: str, label: str, query: str, multi: bool = True) -> Template:
    return Template(name=name, label=label, query=query, dataSource=DATASOURCE,
                    includeAll=True, multi=multi, allValue=".*", default="$__all", refresh=2,
                    sort=1)


def cluster_var() -> Template:
    return query_var("cluster", "Cluster", "label_values(opskit_kafka_up, cluster)")


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False,
           fmt: str = "time_series") -> Target:
    return Target(expr=expr, legendFormat=legend, refId=ref, instant=instant, format=fmt,
                  datasource=DATASOURCE)


class Layout:
    """Places panels on the 24-column grid, row by row."""

    def __init__(self, runbook_base: str) -> None:
        self.base = runbook_base
        self.panels: list[Any] = []
        self._x = 0
        self._y = 0
        self._row_h = 0

    def _place(self, w: int, h: int) -> GridPos:
        if self._x + w > 24:
            self._x = 0
            self._y += self._row_h
            self._row_h = 0
        pos = GridPos(h=h, w=w, x=self._x, y=self._y)
        self._x += w
        self._row_h = max(self._row_h, h)
        return pos

    def row(self, title: str, runbook: str) -> None:
        if self._x:
            self._x = 0
            self._y += self._row_h
            self._row_h = 0
        self.panels.append(RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=self._y),
                                    links=runbook_link(self.base, runbook)))
        self._y += 1

    def stat(self, title: str, runbook: str, targets: list[Target], unit: str = "none",
             w: int = 4, h: int = 4, description: str | None = None,
             thresholds: list[dict[str, Any]] | None = None) -> None:
        self.panels.append(Stat(
            title=title, dataSource=DATASOURCE, targets=targets, format=unit,
            gridPos=self._place(w, h), links=runbook_link(self.base, runbook),
            description=description, reduceCalc="lastNotNull", graphMode="none",
            thresholds=thresholds or [{"color": "green", "value": None}]))

    def timeseries(self, title: str, runbook: str, targets: list[Target], unit: str = "none",
                   w: int = 12, h: int = 8, description: str | None = None,
                   thresholds: list[dict[str, Any]] | None = None) -> None:
        self.panels.append(TimeSeries(
            title=title, dataSource=DATASOURCE, targets=targets, unit=unit,
            gridPos=self._place(w, h), links=runbook_link(self.base, runbook),
            description=description, legendDisplayMode="table", legendPlacement="bottom",
            legendCalcs=["lastNotNull", "max"], tooltipMode="multi",
            thresholds=thresholds or [{"color": "green", "value": None}]))

    def table(self, title: str, runbook: str, targets: list[Target], w: int = 24, h: int = 10,
              description: str | None = None) -> None:
        self.panels.append(Table(
            title=title, dataSource=DATASOURCE, targets=targets, gridPos=self._place(w, h),
            links=runbook_link(self.base, runbook), description=description,
            transformations=[{"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True}}}]))

    def text(self, title: str, runbook: str, content: str, w: int = 12, h: int = 4) -> None:
        self.panels.append(Text(title=title, content=content, gridPos=self._place(w, h),
                                links=runbook_link(self.base, runbook)))


def dashboard(uid: str, title: str, description: str, layout: Layout,
              variables: list[Template], tags: list[str]) -> Dashboard:
    return Dashboard(
        uid=uid, title=title, description=description, tags=["opskit", "kafka", *tags],
        panels=layout.panels, templating=Templating(list=variables),
        schemaVersion=SCHEMA_VERSION, refresh="30s", time=Time("now-3h", "now"),
        timezone="utc", graphTooltip=1,
        links=[{"title": "Runbooks", "type": "link", "url": layout.base, "targetBlank": True,
                "icon": "doc"}],
    ).auto_panel_ids()
