/// The console's stylesheet and script, served from the broker itself (no build step, no CDN: it works offline).
/// The Content-Security-Policy allows only these: no inline script or style.
enum ConsoleAssets {
    static let css = """
        :root { --ink: #1b1f24; --muted: #4b5563; --line: #d0d7de; --paper: #ffffff; --band: #f3f5f7;
          --accent: #0b57d0; --accent-ink: #ffffff; --good: #116329; --bad: #a40e26; --bar: #9aa5b1; --read: #0b57d0; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
          color: var(--ink); background: var(--paper); }
        a { color: var(--accent); }
        a:focus, button:focus, input:focus, textarea:focus, select:focus { outline: 3px solid #f4b400; outline-offset: 2px; }
        .skip { position: absolute; left: -999px; }
        .skip:focus { left: 8px; top: 8px; background: var(--paper); padding: 4px 8px; z-index: 2; }
        header.top { background: var(--ink); color: #fff; padding: 8px 16px; display: flex; flex-wrap: wrap;
          gap: 8px 16px; align-items: center; justify-content: space-between; }
        header.top a { color: #fff; }
        header.top .who { font-size: 14px; }
        nav.main ul { list-style: none; margin: 0; padding: 0 16px; display: flex; flex-wrap: wrap; gap: 4px 16px;
          background: var(--band); border-bottom: 1px solid var(--line); }
        nav.main a { display: inline-block; padding: 10px 2px; text-decoration: none; color: var(--ink); }
        nav.main a[aria-current="page"] { border-bottom: 3px solid var(--accent); font-weight: 600; }
        main { padding: 16px; max-width: 1100px; margin: 0 auto; }
        h1 { font-size: 24px; margin: 8px 0 16px; }
        h2 { font-size: 19px; margin: 24px 0 8px; }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: 12px; }
        .card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
        .card .value { font-size: 26px; font-weight: 700; display: block; }
        .progress { display: grid; gap: 4px; max-width: 720px; margin: 8px 0 16px; }
        .progress label { font-weight: 400; }
        progress { width: 100%; height: 18px; accent-color: var(--accent); }
        .card .value.small { font-size: 17px; overflow-wrap: anywhere; }
        .card .label { color: var(--muted); font-size: 14px; }
        .table-wrap { overflow-x: auto; }
        table { border-collapse: collapse; width: 100%; font-size: 15px; }
        th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { background: var(--band); }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        form.inline { display: inline; }
        form.stack { display: grid; gap: 8px; max-width: 460px; }
        form.stack.wide { max-width: 720px; }
        fieldset { border: 1px solid var(--line); border-radius: 4px; padding: 8px 12px; }
        legend { font-weight: 600; font-size: 14px; }
        label.check { display: inline; font-weight: 400; margin-left: 6px; }
        code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 14px; }
        form.row { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin: 8px 0; }
        form.row > div { min-width: 0; max-width: 100%; }
        label { font-weight: 600; display: block; font-size: 14px; }
        input, textarea, select { font: inherit; padding: 6px 8px; border: 1px solid #6b7280; border-radius: 4px;
          max-width: 100%; }
        textarea { width: 100%; min-height: 140px; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
        button { font: inherit; padding: 6px 14px; border-radius: 4px; border: 1px solid var(--accent);
          background: var(--accent); color: var(--accent-ink); cursor: pointer; }
        button.secondary { background: var(--paper); color: var(--accent); }
        button.danger { background: var(--bad); border-color: var(--bad); }
        .notice { padding: 8px 12px; border-left: 4px solid var(--good); background: #e9f5ec; margin: 8px 0; }
        .error { padding: 8px 12px; border-left: 4px solid var(--bad); background: #fbeaec; margin: 8px 0; }
        .muted { color: var(--muted); }
        .bad { color: var(--bad); font-weight: 600; }
        .chart { width: 100%; height: auto; max-width: 900px; border: 1px solid var(--line); border-radius: 6px; }
        .chart .assigned { fill: var(--bar); }
        .chart .read { fill: var(--read); }
        .chart .axis { stroke: var(--muted); stroke-width: 1; }
        .chart text { font-size: 11px; fill: var(--muted); }
        .legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: -1px; }
        .legend .assigned { background: var(--bar); }
        .legend .read { background: var(--read); }
        .signin { max-width: 420px; margin: 48px auto; }
        @media (max-width: 600px) { main { padding: 10px; } h1 { font-size: 21px; } td, th { padding: 5px; } }
        """

    static let javascript = """
        "use strict";
        // Asks before a destructive form is sent (forms with data-confirm).
        document.addEventListener("submit", function (event) {
          var message = event.target.getAttribute("data-confirm");
          if (message && !window.confirm(message)) { event.preventDefault(); }
        });
        // A CSV file chosen for an import is read into the form's text area.
        document.addEventListener("change", function (event) {
          var input = event.target;
          if (!input.matches || !input.matches("input[type=file][data-into]")) { return; }
          var target = document.getElementById(input.getAttribute("data-into"));
          if (!target || !input.files || !input.files[0]) { return; }
          var reader = new FileReader();
          reader.onload = function () { target.value = reader.result; };
          reader.readAsText(input.files[0]);
        });
        """
}
