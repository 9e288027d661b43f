#if Viewer
extension ViewerPages {
    /// The templates by name: `layout` wraps every page's `body` (already rendered, so it is
    /// inserted with `{{{ }}}`); every other value is inserted escaped.
    static let templates: [(String, String)] = [
        ("layout", """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · eventkernel</title>
        <style>
        body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
        header { background: #22313f; color: #fff; padding: 8px 20px; display: flex; gap: 20px; align-items: center; }
        header a { color: #fff; font-weight: 600; text-decoration: none; }
        header form { margin-left: auto; }
        main { padding: 12px 20px 40px; max-width: 1100px; }
        h1 { font-size: 20px; margin: 10px 0; word-break: break-all; } h2 { font-size: 16px; margin: 22px 0 8px; }
        table { border-collapse: collapse; background: #fff; } th, td { padding: 3px 10px; border-bottom: 1px solid #e3e3e3; text-align: left; vertical-align: top; }
        td.n { text-align: right; font-variant-numeric: tabular-nums; }
        dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; } dt { color: #666; } dd { margin: 0; }
        pre { background: #fff; border: 1px solid #e3e3e3; padding: 8px; overflow-x: auto; }
        .note { color: #8a5300; } .error { color: #a40000; }
        ol.timeline { list-style: none; padding: 0; } ol.timeline li { background: #fff; border: 1px solid #e3e3e3; margin: 6px 0; padding: 6px 10px; }
        tr.added td:nth-child(2) { color: #046b00; } tr.removed td:nth-child(2) { color: #a40000; } tr.changed td:nth-child(2) { color: #0a4fa3; }
        svg rect { fill: #3b6ea5; } svg text { font-size: 11px; fill: #666; }
        </style></head>
        <body><header><a href="/">eventkernel</a><span>read-only viewer</span>
        <form method="get" action="/events"><label>position <input name="position" size="10" inputmode="numeric"></label> <button>Go</button></form></header>
        <main>{{{body}}}</main></body></html>
        """),
        ("overview", """
        <h1>Overview</h1>
        <dl id="totals">
        <dt>store</dt><dd id="store">{{store}}</dd>
        <dt>events</dt><dd id="event-count">{{events}}</dd>
        <dt>streams</dt><dd id="stream-count">{{streams}}</dd>
        <dt>next position</dt><dd>{{nextPosition}}</dd>
        <dt>recorded</dt><dd id="recorded">{{recorded}}</dd>
        <dt>integrity</dt><dd><span id="integrity">{{integrity}}</span> · <a id="check-again" href="/?check=1">check again</a></dd>
        </dl>
        <h2>Entity types</h2>
        <table id="types"><tr><th>type</th><th>events</th><th>streams</th></tr>
        {{#types}}<tr><td><a href="{{href}}">{{name}}</a></td><td class="n">{{events}}</td><td class="n">{{streams}}</td></tr>{{/types}}
        </table>
        {{#hasHistogram}}<h2>Events per {{period}}</h2>{{{chart}}}{{/hasHistogram}}
        <h2>Event types</h2>
        <table id="event-types"><tr><th>event</th><th>events</th></tr>
        {{#eventTypes}}<tr><td>{{name}}</td><td class="n">{{count}}</td></tr>{{/eventTypes}}
        </table>
        <h2>Segments</h2>
        {{#hasSegments}}<table id="segments"><tr><th>file</th><th>bytes</th><th></th></tr>
        {{#segments}}<tr><td>{{name}}</td><td class="n">{{bytes}}</td><td>{{detail}}</td></tr>{{/segments}}</table>{{/hasSegments}}
        {{^hasSegments}}<p>none (a PostgreSQL log keeps its events in a table)</p>{{/hasSegments}}
        <h2>Snapshots</h2>
        {{#hasSnapshots}}<table id="snapshots"><tr><th>file</th><th>bytes</th><th></th></tr>
        {{#snapshots}}<tr><td>{{name}}</td><td class="n">{{bytes}}</td><td>{{detail}}</td></tr>{{/snapshots}}</table>{{/hasSnapshots}}
        {{^hasSnapshots}}<p>none</p>{{/hasSnapshots}}
        """),
        ("streams", """
        <h1>{{type}} streams</h1>
        <form method="get" action="/streams" id="search-form"><input type="hidden" name="type" value="{{type}}">
        <input name="q" id="search" value="{{search}}" placeholder="part of an id"> <button id="search-button">Search</button></form>
        <p id="matching">{{matching}} stream{{^one}}s{{/one}}{{#searching}} whose id contains “{{search}}”{{/searching}}</p>
        <table id="streams"><tr><th>id</th><th>version</th><th>events</th><th>last event</th><th>last recorded at</th></tr>
        {{#streams}}<tr><td><a href="{{href}}">{{id}}</a></td><td class="n">{{version}}</td><td class="n">{{events}}</td><td>{{lastEvent}}</td><td>{{lastRecordedAt}}</td></tr>{{/streams}}
        </table>
        {{#nextHref}}<p><a id="next-page" href="{{nextHref}}">next page</a></p>{{/nextHref}}
        """),
        ("entity", """
        <h1><a href="{{typeHref}}">{{type}}</a> {{id}}</h1>
        <p id="summary">version {{version}}: {{events}} events, recorded {{first}} … {{last}}</p>
        <section id="state"><h2 id="moment">State {{moment}}</h2>
        <form method="get" action="/entity" id="version-form"><input type="hidden" name="type" value="{{type}}"><input type="hidden" name="id" value="{{id}}">{{#stringID}}<input type="hidden" name="idType" value="string">{{/stringID}}
        <label>after version <input type="range" id="version-slider" name="version" min="1" max="{{version}}" value="{{stateVersion}}" oninput="document.getElementById('version-shown').textContent = this.value"></label>
        <output id="version-shown">{{stateVersion}}</output> <button id="version-show">Show</button></form>
        <form method="get" action="/entity" id="as-of-form"><input type="hidden" name="type" value="{{type}}"><input type="hidden" name="id" value="{{id}}">{{#stringID}}<input type="hidden" name="idType" value="string">{{/stringID}}
        <label>as the store knew it at <input id="as-of" name="asOf" size="28" placeholder="2026-11-28T07:00:00Z"></label> <button id="as-of-show">Show</button></form>
        {{#stateJSON}}<pre id="state-json">{{stateJSON}}</pre>{{/stateJSON}}
        {{#stateNote}}<p class="note" id="state-note">{{stateNote}}</p>{{/stateNote}}
        </section>
        <h2>Timeline</h2>
        {{#previousHref}}<p><a id="previous-page" href="{{previousHref}}">earlier events</a></p>{{/previousHref}}
        <ol class="timeline" id="timeline">
        {{#timeline}}<li><div><a href="{{eventHref}}">#{{position}}</a> · version {{version}} · <b>{{event}}</b> · {{recordedAt}} · <a href="{{stateHref}}">state after</a></div>
        {{#note}}<p class="note">{{note}}</p>{{/note}}
        {{#hasChanges}}<table class="diff">{{#changes}}<tr class="{{kind}}"><td>{{path}}</td><td>{{kind}}</td><td>{{from}}</td><td>{{to}}</td></tr>{{/changes}}</table>{{/hasChanges}}
        {{#unchanged}}<p class="note">no change</p>{{/unchanged}}</li>
        {{/timeline}}
        </ol>
        {{#nextHref}}<p><a id="next-page" href="{{nextHref}}">later events</a></p>{{/nextHref}}
        """),
        ("event", """
        <h1>Event #{{position}}</h1>
        <dl id="envelope">
        <dt>recorded at</dt><dd>{{recordedAt}}</dd>
        <dt>stream</dt><dd><a id="stream-link" href="{{entityHref}}">{{streamType}} {{streamID}}</a></dd>
        <dt>version</dt><dd>{{version}}</dd>
        <dt>event</dt><dd id="event-type">{{event}}</dd>
        <dt>schema version</dt><dd>{{schemaVersion}}</dd>
        {{#metadata}}<dt>{{name}}</dt><dd>{{value}}</dd>{{/metadata}}
        <dt>payload codec</dt><dd>{{codec}}</dd>
        </dl>
        <h2>Payload</h2>
        {{#payload}}<pre id="payload">{{payload}}</pre>{{/payload}}
        {{#note}}<p class="note" id="payload-note">{{note}}</p>{{/note}}
        <h2>Raw bytes ({{bytes}})</h2>
        <pre id="hex">{{hex}}</pre>
        <p>{{#previousHref}}<a id="previous-event" href="{{previousHref}}">previous position</a> · {{/previousHref}}<a id="next-event" href="{{nextHref}}">next position</a></p>
        """),
        ("error", """
        <h1 class="error">{{status}}</h1>
        <p id="error-message">{{message}}</p>
        <p><a href="/">overview</a></p>
        """),
    ]
}
#endif
