/**
 * One self-contained HTML file of insights: interactive charts (uPlot,
 * its script and styles read from its package and inlined) above the
 * tables of the same data. It needs no network to open: everything is in
 * the file, and its Content-Security-Policy forbids fetching anything.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

export type ReportChart =
  | { kind: 'line'; title: string; dates: readonly string[]; values: readonly (number | null)[] }
  | { kind: 'bars'; title: string; labels: readonly string[]; notes: readonly string[]; values: readonly (number | null)[] };

interface ReportTable {
  title: string;
  headers: readonly string[];
  rows: readonly (readonly unknown[])[];
}

export interface Report {
  title: string;
  account: string;
  /** "2026-10-22 to 2026-11-20", or what the media were filtered by. */
  range: string;
  /** ISO time the report was made. */
  generatedAt: string;
  charts: readonly ReportChart[];
  tables: readonly ReportTable[];
}

const require = createRequire(import.meta.url);

function uplotAssets(): { script: string; style: string } {
  return {
    script: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
    style: readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
  };
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Text that cannot end the <script> or <style> element it sits in. */
function inlineSafe(text: string): string {
  return text.replace(/<\/(script|style)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

function cell(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function tableHtml(table: ReportTable): string {
  const head = table.headers.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  const body = table.rows
    .map(
      (row) =>
        `<tr>${row.map((v) => `<td${typeof v === 'number' ? ' class="num"' : cell(v).length > 30 ? ' class="long"' : ''}>${escapeHtml(cell(v))}</td>`).join('')}</tr>`,
    )
    .join('\n');
  return `<section class="table"><h2>${escapeHtml(table.title)}</h2>\n<table><thead><tr>${head}</tr></thead>\n<tbody>\n${body}\n</tbody></table></section>`;
}

/** Draws every chart of the data island with uPlot, each as wide as its box. Runs in the page. */
const DRAW = `
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var compact = function (v) {
    if (v == null || !isFinite(v)) return '';
    var a = Math.abs(v), units = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) if (a >= units[i][0]) { var n = v / units[i][0]; return (Math.abs(n) >= 10 ? Math.round(n) : Math.round(n * 10) / 10) + units[i][1]; }
    return String(Math.round(v * 100) / 100);
  };
  var palette = ['#1f77b4', '#2ca02c', '#d62728', '#9467bd', '#ff7f0e', '#17becf'];
  var charts = [];
  data.charts.forEach(function (chart, index) {
    var box = document.getElementById('chart-' + index);
    var width = Math.max(320, box.clientWidth || 800);
    var color = palette[index % palette.length];
    var opts, values;
    if (chart.kind === 'line') {
      values = [chart.dates.map(function (d) { return Date.parse(d + 'T00:00:00Z') / 1000; }), chart.values];
      opts = {
        width: width, height: 260, tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
        series: [{ label: 'date', value: '{YYYY}-{MM}-{DD}' }, { label: chart.title, stroke: color, width: 2, fill: color + '22', value: function (u, v) { return v == null ? '-' : v.toLocaleString('en'); } }],
        axes: [{}, { values: function (u, splits) { return splits.map(compact); }, size: 60 }],
      };
    } else {
      values = [chart.labels.map(function (_, i) { return i; }), chart.values];
      opts = {
        width: width, height: 420,
        scales: { x: { time: false, range: [-0.5, chart.labels.length - 0.5] } },
        series: [
          { label: 'media', value: function (u, i) { return i == null ? '-' : chart.labels[Math.round(i)] + ' (' + chart.notes[Math.round(i)] + ')'; } },
          { label: chart.title, stroke: color, fill: color + 'aa', width: 1, paths: uPlot.paths.bars({ size: [0.7, 80] }), points: { show: false },
            value: function (u, v) { return v == null ? '-' : v.toLocaleString('en'); } },
        ],
        axes: [
          { space: 12, incrs: [1], rotate: -40, size: 130, gap: 6,
            values: function (u, splits) { return splits.map(function (i) { var l = chart.labels[i] || ''; return l.length > 20 ? l.slice(0, 19) + '\\u2026' : l; }); } },
          { values: function (u, splits) { return splits.map(compact); }, size: 60 },
        ],
      };
    }
    charts.push(new uPlot(opts, values, box));
  });
  window.addEventListener('resize', function () {
    charts.forEach(function (u, index) { var box = document.getElementById('chart-' + index); u.setSize({ width: Math.max(320, box.clientWidth), height: u.height }); });
  });
  document.body.setAttribute('data-charts-drawn', String(charts.length));
})();
`;

const PAGE_STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px 24px; color: #222; background: #fff; }
header { border-bottom: 1px solid #ddd; margin-bottom: 16px; }
header h1 { font-size: 20px; margin: 0 0 4px; }
header dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0 12px; }
header dt { color: #666; }
header dd { margin: 0; }
h2 { font-size: 16px; margin: 20px 0 6px; }
.chart { margin-bottom: 12px; min-height: 200px; }
.table { overflow-x: auto; }
td { min-width: 4em; }
td.long { min-width: 16em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #eee; padding: 3px 10px; text-align: left; vertical-align: top; max-width: 420px; overflow-wrap: break-word; }
th, td.num { white-space: nowrap; }
td.num { text-align: right; }
`;

export function htmlReport(report: Report): string {
  const { script, style } = uplotAssets();
  const data = JSON.stringify({ charts: report.charts }).replace(/</g, '\\u003c');
  const charts = report.charts
    .map((chart, i) => `<section><h2>${escapeHtml(chart.title)}</h2><div class="chart" id="chart-${i}" data-kind="${chart.kind}"></div></section>`)
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(report.title)}</title>
<style>${inlineSafe(style)}</style>
<style>${PAGE_STYLE}</style>
</head>
<body>
<header>
<h1>${escapeHtml(report.title)}</h1>
<dl>
<dt>account</dt><dd id="report-account">${escapeHtml(report.account)}</dd>
<dt>range</dt><dd id="report-range">${escapeHtml(report.range)}</dd>
<dt>generated</dt><dd id="report-generated">${escapeHtml(report.generatedAt)}</dd>
</dl>
</header>
<main>
${charts}
${report.tables.map(tableHtml).join('\n')}
</main>
<script type="application/json" id="report-data">${data}</script>
<script>${inlineSafe(script)}</script>
<script>${DRAW}</script>
</body>
</html>
`;
}
