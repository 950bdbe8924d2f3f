"use strict";
// cotaudit view: renders the data packed in this page (see docs/viewer.md). The index is
// decoded at load; a chunk of audits only when one of them is shown. Every number shown
// comes from the data as evaluate wrote it; this script formats, filters and pages.
(() => {
  const $ = (id) => document.getElementById(id);
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
  const int = (n) => (n === null || n === undefined ? "n/a" : Number(n).toLocaleString("en-US"));
  // x to `digits` decimals as Python's format (report.md) writes it: an exact tie (0.8125)
  // rounds half to even, where toFixed would round it up.
  function fixed(x, digits) {
    const value = Number(x);
    const exact = Math.abs(value).toFixed(Math.min(100, digits + 30)).split(".");
    const rest = exact[1].slice(digits);
    if (/^50*$/.test(rest) && Number(exact[1][digits - 1] ?? exact[0].slice(-1)) % 2 === 0) {
      const kept = digits ? `${exact[0]}.${exact[1].slice(0, digits)}` : exact[0];
      return (value < 0 && Number(kept) !== 0 ? "-" : "") + kept;
    }
    return value.toFixed(digits);
  }
  const fix3 = (x) => (x === null || x === undefined ? "n/a" : fixed(x, 3));
  // A share the report computed (0..1, or null where nothing was judged) as a percentage.
  const share = (x) => (x === null || x === undefined ? "n/a" : fixed(100 * x, 1) + "%");
  const shareCi = (ci) =>
    Array.isArray(ci) ? ` [${fixed(100 * ci[0], 1)}, ${fixed(100 * ci[1], 1)}]` : "";
  const ciText = (ci) => (Array.isArray(ci) ? `[${fix3(ci[0])}, ${fix3(ci[1])}]` : "");

  function base64Bytes(text) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const bin = atob(text);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  async function decodeElement(id) {
    const element = $(id);
    if (!element) throw new Error(`the page lacks its data element ${id}`);
    const stream = new Blob([base64Bytes(element.textContent.trim())])
      .stream()
      .pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  // Re-rendering a block replaces the control a keyboard user just pressed (a pager button, a
  // probe tab, "show more rows"): focus goes back to its successor, found by the same id or
  // data attribute, so that Enter, Tab and Escape carry on from there instead of from <body>.
  function focusKey(el) {
    if (el.id) return `#${CSS.escape(el.id)}`;
    for (const name of ["go", "condition", "repeat"]) {
      if (el.dataset[name] !== undefined) {
        return `${el.tagName.toLowerCase()}[data-${name}="${CSS.escape(el.dataset[name])}"]`;
      }
    }
    return el.classList.contains("page-input") ? "input.page-input" : null;
  }

  function focusIn(container, key) {
    // A button that became disabled (next on the last page) cannot hold focus: the page box can.
    const found = [container.querySelector(key), container.querySelector("input.page-input")];
    const target = found.find((el) => el && !el.disabled);
    if (target) target.focus({ preventScroll: true });
  }

  function replaceKeepingFocus(container, html) {
    const active = document.activeElement;
    const key = active && active !== container && container.contains(active) ? focusKey(active) : null;
    container.innerHTML = html;
    if (key) focusIn(container, key);
  }

  let index = null;
  const chunkCache = new Map(); // chunk number -> Promise of its decoded audits
  const CHUNK_CACHE_LIMIT = 48;
  const state = {
    evaluator: 0, verdict: -1, model: -1, rawr: false, fp: false, problem: "",
    sort: "", page: 0, size: 20,
  };
  let matches = [];
  let FLAG = {};

  function loadChunk(k) {
    if (chunkCache.has(k)) {
      const found = chunkCache.get(k);
      chunkCache.delete(k);
      chunkCache.set(k, found); // most recently used last
      return found;
    }
    const promise = decodeElement(`d-${k}`).then((chunk) => {
      const cols = index.pair_columns;
      const byAudit = new Map();
      for (const audit of chunk.audits) {
        audit.pairs = audit.pairs.map((row) => {
          const pair = {};
          cols.forEach((name, i) => { pair[name] = row[i]; });
          return pair;
        });
        audit.problemEntry = chunk.problems[audit.problem];
        audit.texts = chunk.texts;
        byAudit.set(audit.audit, audit);
      }
      return byAudit;
    });
    chunkCache.set(k, promise);
    while (chunkCache.size > CHUNK_CACHE_LIMIT) chunkCache.delete(chunkCache.keys().next().value);
    return promise;
  }

  // ---- models side by side -------------------------------------------------------------

  const evaluatorLabel = (e) => index.evaluators[e].label;
  // Whether evaluator e carries A's blind spot (report.json headline.found blind_spot).
  const blindSpot = (e) => index.models.some((m) => (m.found[e] || {}).blind);

  function prfCell(row) {
    if (!row) return '<td class="na">not in this report</td>';
    // Undefined as report.md has it (evaluator/report.py metric): precision without a
    // predicted dependency, recall and F1 without a gold one.
    const noPositives = row.tp + row.fp === 0;
    const noGold = row.tp + row.fn === 0;
    const f1 = noGold ? null : row.f1;
    const line = (metric, name, value, ci, undefinedWhen) =>
      `<div class="prf"><span class="metric">${name}</span> ` +
      `<span class="num" data-metric="${metric}">${undefinedWhen ? "n/a" : fix3(value)}</span>` +
      (undefinedWhen || !ci ? "" : ` <span class="ci" data-metric="${metric}-ci">${ciText(ci)}</span>`) +
      "</div>";
    return (
      "<td>" +
      line("f1", "F1", f1, row.ci, f1 === null) +
      line("precision", "P", row.precision, row.ci_precision, noPositives) +
      line("recall", "R", row.recall, row.ci_recall, noGold) +
      `<div class="counts">tp ${int(row.tp)} · fp ${int(row.fp)} · fn ${int(row.fn)} · tn ${int(row.tn)}</div>` +
      "</td>"
    );
  }

  let moreRowsShown = false;

  function renderSummary() {
    const models = index.models;
    const e = state.evaluator;
    const ev = index.evaluators[e];
    const head = models.map((m, i) => {
      const id = m.identity || {};
      const ident = [id.provider, id.model].filter(Boolean).join(" · ");
      return `<th class="model" scope="col"><span class="swatch m${i % 8}"></span>${esc(m.label)}` +
        (ident ? `<div class="ident">${esc(ident)}</div>` : "") + "</th>";
    }).join("");
    const row = (key, label, meaning, cells, cls = "") =>
      `<tr data-key="${key}" class="${cls}"><th scope="row">${label}` +
      `<div class="meaning">${meaning}</div></th>${cells}</tr>`;
    const section = (title, note) =>
      `<tr class="section-head"><th colspan="${models.length + 1}"><span class="stay">${title}` +
      (note ? ` <span class="note">${note}</span>` : "") + "</span></th></tr>";
    const per = (fn) => models.map((m, i) => fn(m, i)).join("");
    const hasTruth = models.some((m) => m.truth);
    // The evaluator whose figures carry A's blind spot (report.json headline.found blind_spot):
    // each such figure is set beside the same under A+A′, which sees entity premises, and its
    // line says the difference is the blind spot, as report.md does.
    const blind = blindSpot(e);
    const both = index.evaluators.findIndex((x) => x.key === "combined");
    const bothLabel = esc(index.evaluators[both].label);
    const dagger = blind ? " †" : "";
    const BLIND_LINE = `; beside it, ${bothLabel}: the difference is ${esc(ev.label)}’s ` +
      `blind spot, not what the model did (${esc(ev.label)} counts every use of an ` +
      "entity-introduction premise as ignored)";
    const beside = (m, name, num, den) => {
      if (!blind) return "";
      const f = m.found[both] || {};
      return `<div class="sub beside">under ${bothLabel} <span data-value="beside-${name}">` +
        `${den === null ? share(f[num]) : `${int(f[num])} of ${int(f[den])}`}</span></div>`;
    };
    const nBoot = (m) => m.n_boot; // the report section's bootstrap.n_boot
    const noIntervals = models.every((m) => nBoot(m) === 0);
    const someIntervalsMissing = !noIntervals && models.some((m) => nBoot(m) === 0);
    let body = "";
    body += section("What the audit found about each model",
      `verdicts of ${esc(ev.label)}${dagger} (${esc(ev.meaning)}); change with “verdicts of” below`);
    body += row("accuracy", "answered correctly",
      "final “Answer” equals the gold answer, over the audited problems",
      per((m) => `<td><span class="num" data-value="correct">${int(m.accuracy.correct)}</span>` +
        ` of <span data-value="problems">${int(m.accuracy.problems)}</span>` +
        ` <span class="sub">(${share(m.accuracy.rate)})</span></td>`));
    body += row("ignored_rule", "rule premises ignored",
      "uses of a rule premise (“Xs are Ys”) the gold proof needs, whose step did not change when the premise was renamed (INSENSITIVE)",
      per((m) => {
        const f = m.found[e] || {};
        return `<td><span class="num big" data-value="ignored-rule">${int(f.ignored_rule)}</span> of ` +
          `<span data-value="judged-rule">${int(f.judged_rule)}</span>` +
          `<div class="sub"><span data-value="share-rule">${share(f.grounded_share_rule)}</span> grounded</div></td>`;
      }));
    body += row("ignored_entity", "entity-introduction premises ignored" + dagger,
      "the same for premises that introduce the entity (“Alex is a bempus”)" + (blind ? BLIND_LINE : ""),
      per((m) => {
        const f = m.found[e] || {};
        return `<td><span class="num big" data-value="ignored-entity">${int(f.ignored_entity)}</span> of ` +
          `<span data-value="judged-entity">${int(f.judged_entity)}</span>` +
          `<div class="sub"><span data-value="share-entity">${share(f.grounded_share_entity)}</span> grounded</div>` +
          beside(m, "ignored-entity", "ignored_entity", "judged_entity") + "</td>";
      }));
    body += row("grounded", "grounded share" + dagger,
      "of all premise uses the gold proof needs and the audit judged, the share whose step changed (GROUNDED or INPUT-SENSITIVE)" +
        (blind ? BLIND_LINE : ""),
      per((m) => {
        const f = m.found[e] || {};
        return `<td><span class="num big" data-value="grounded">${share(f.grounded_share)}</span>` +
          (f.grounded_ci ? `<div class="sub">95% CI <span data-value="grounded-ci">${shareCi(f.grounded_ci).trim()}</span></div>` : "") +
          `<div class="sub"><span data-value="dependent">${int(f.dependent_gold)}</span> of ` +
          `<span data-value="judged">${int(f.judged_gold)}</span>; ` +
          `<span data-value="ignored">${int(f.ignored)}</span> ignored</div>` +
          beside(m, "grounded", "grounded_share", null) + "</td>";
      }));
    body += row("rawr", "right answer, wrong reasoning" + dagger,
      "problems answered correctly with at least one ignored premise use" + (blind ? BLIND_LINE : ""),
      per((m) => {
        const f = m.found[e] || {};
        return `<td><span class="num big" data-value="rawr">${int(f.rawr)}</span> of ` +
          `<span data-value="correct">${int(f.correct)}</span> correct` +
          `<div class="sub"><span data-value="rawr-rule">${int(f.rawr_rule)}</span> through a rule premise, ` +
          `<span data-value="rawr-entity">${int(f.rawr_entity_only)}</span> through entity-introduction premises only</div>` +
          beside(m, "rawr", "rawr", "correct") + "</td>";
      }));
    if (hasTruth) {
      body += row("truth", "truly ignored premises flagged",
        "simulated reasoners only: of the gold premise uses the reasoner did not use, how many A+A′+cascade called not dependent (A †: INSENSITIVE)",
        per((m) => m.truth
          ? `<td><span class="num" data-value="flagged-cascade">${int(m.truth.flagged_cascade)}</span> of ` +
            `<span data-value="truly-ignored">${int(m.truth.ignored)}</span>` +
            `<div class="sub">A †: <span data-value="flagged">${int(m.truth.flagged)}</span></div></td>`
          : '<td class="na">no truth records</td>'));
    }
    // report.json's rawr and misrepresentations are A's alone: each beside the same under A+A′
    // whatever "verdicts of" says, with the line saying the difference is A's blind spot.
    const BLIND_A = `; beside it, ${bothLabel}: the difference is A’s blind spot, not what the model ` +
      "did (A counts every use of an entity-introduction premise as ignored)";
    body += row("rawr_consistent", "right answer, wrong reasoning under A †",
      "report.json rawr" + BLIND_A,
      per((m) => {
        const r = m.rawr_consistent;
        const f = m.found[both] || {};
        return `<td><span class="num" data-value="rawr">${int(r.rawr)}</span> of ` +
          `<span data-value="correct">${int(r.correct)}</span> correct` +
          `<div class="sub"><span data-value="rawr-rule">${int(r.predicate)}</span> through a rule premise, ` +
          `<span data-value="rawr-entity">${int(r.structural_only)}</span> through entity-introduction premises only</div>` +
          `<div class="sub beside">under ${bothLabel} <span data-value="beside-rawr">${int(f.rawr)} of ${int(f.correct)}</span></div></td>`;
      }));
    body += row("misrepresentations", "misrepresentations under A †",
      "pairs INSENSITIVE under A whose step cites the premise, of those INSENSITIVE" + BLIND_A,
      per((m) => {
        const b = m.misrepresentations_beside || {};
        return `<td><span class="num" data-value="misrepresentations">${int(m.misrepresentations)}</span>` +
          (b.insensitive === null || b.insensitive === undefined ? "" : ` of <span data-value="insensitive">${int(b.insensitive)}</span>`) +
          (b.combined === null || b.combined === undefined ? "" :
            `<div class="sub beside">under ${bothLabel} <span data-value="beside-misrepresentations">` +
            `${int(b.combined)} of ${int(b.combined_insensitive)}</span></div>`) + "</td>";
      }));

    const intervals = noIntervals
      ? "no bootstrap intervals (evaluated with --n-boot 0)"
      : "95% bootstrap intervals over problems" +
        (someIntervalsMissing ? " (none for a run evaluated with --n-boot 0)" : "");
    body += section("The audit’s validity against the proof tree",
      `precision, recall and F1 of the verdicts against the gold proof’s direct premises, ${intervals}. ` +
      "The proof tree is what a model should use, not what it used: a premise the model truly ignored " +
      "and the audit calls ignored counts as a miss, so it lowers F1 though the audit is right");
    const present = index.validity_rows.filter((vr) => models.some((m) => m.rows[vr.key]));
    for (const vr of present.filter((r) => r.primary)) {
      body += row(vr.key, esc(vr.label) + (vr.blind ? " †" : ""), esc(vr.meaning),
        per((m) => prfCell(m.rows[vr.key])), "prf-row");
    }
    const more = present.filter((r) => !r.primary);
    if (more.length) {
      body += `<tr class="more-toggle"><th colspan="${models.length + 1}"><button type="button" id="more-rows" class="stay">` +
        `${moreRowsShown ? "hide" : "show"} ${more.length} more rows: ${esc(more.map((r) => r.label).join(", "))}</button></th></tr>`;
      for (const vr of more) {
        body += row(vr.key, esc(vr.label) + (vr.blind ? " †" : ""), esc(vr.meaning),
          per((m) => prfCell(m.rows[vr.key])), "prf-row more");
      }
    }

    body += section("Reading, alignment and cost", "");
    body += row("parse_rates", "steps read",
      "share of steps read as a proposition or classified as a non-assertion, per condition",
      per((m) => "<td>" + index.conditions.map((c) =>
        `<div class="kv"><span>${c}</span> <span class="num" data-value="parse-${c}">${fix3(m.parse_rates[c])}</span></div>`
      ).join("") + "</td>"));
    body += row("alignment", "steps aligned to the proof",
      "original CoT steps matched to a gold proof step by content",
      per((m) => `<td>${int(m.alignment.matched)} of ${int(m.alignment.cot_steps)}</td>`));
    body += row("certificates", "pairs audited",
      "(step, premise) pairs with a certificate; evaluable ones enter the metrics",
      per((m) => `<td><span data-value="evaluable">${int(m.certificates.evaluable)}</span> evaluable of ` +
        `<span data-value="total">${int(m.certificates.total)}</span></td>`));
    body += row("tokens", "tokens",
      "from the response records’ usage: input / output, over every request (samples included)",
      per((m) => `<td><span data-value="input-tokens">${int(m.usage.input_tokens)}</span> in / ` +
        `<span data-value="output-tokens">${int(m.usage.output_tokens)}</span> out` +
        `<div class="sub">${int(m.usage.requests)} requests</div></td>`));
    body += row("cost", "cost",
      "tokens × the config’s price_input_per_mtok / price_output_per_mtok (in the prices’ currency); requests sent by batch at the config’s batch_discount",
      per((m) => m.usage.cost === null
        ? '<td class="na">no prices in the config</td>'
        : `<td><span class="num" data-value="cost">${fixed(m.usage.cost, 2)}</span>` +
          `<div class="sub">at ${m.usage.price_input_per_mtok ?? 0} / ${m.usage.price_output_per_mtok ?? 0} per M tokens` +
          (m.usage.batch_requests
            ? `; <span data-value="batch-requests">${int(m.usage.batch_requests)}</span> requests by batch, ${Math.round(100 * m.usage.batch_discount)}% off`
            : "") +
          `</div></td>`));

    let runRow = "";
    if (index.runs.length > 1) {
      runRow = "<tr class=\"run-row\"><th></th>" + index.runs.map((r, k) => {
        const span = models.filter((m) => m.run === k).length;
        return span ? `<th colspan="${span}" scope="colgroup">run ${esc(r.label)}</th>` : "";
      }).join("") + "</tr>";
    }
    replaceKeepingFocus($("summary-table"),
      `<table id="models" class="models${moreRowsShown ? " show-more" : ""}"><thead>${runRow}` +
      `<tr><th></th>${head}</tr></thead><tbody>${body}</tbody></table>`);
    requestAnimationFrame(keepHeadInView); // once laid out, not forcing a layout mid-render
    const missing = index.runs.some((r) => (r.options || {}).vanished === "missing");
    $("summary-legend").innerHTML =
      "<p><b>†</b> carries the known blind spot of consistent substitution: renaming a predicate in " +
      "<i>every</i> premise leaves an entity-introduction premise (“Alex is a bempus”) true of the " +
      "renamed world, so A cannot see a step depend on it and counts every such use as ignored. " +
      "The local probe (A′, and A+A′) renames in that premise only and can see it; where A+A′ still " +
      "lists entity-introduction premises as ignored, the local probe’s step was unchanged. " +
      (missing
        ? "This evaluation read a conclusion the local probe’s output no longer reaches as missing " +
          "(<code>--vanished missing</code>): such a pair is not judged.</p>"
        : "A conclusion the local probe’s output no longer reaches (the chain broke where the " +
          "premise was renamed) counts as a change (rule GROUNDED_VANISHED).</p>") +
      "<p>Columns are models; each row says what its figure counts. " +
      (noIntervals
        ? "No figure has an interval: the runs were evaluated without bootstrap (--n-boot 0)"
        : "Intervals are 95% percentile bootstrap intervals over problems" +
          (someIntervalsMissing ? "; a run evaluated with --n-boot 0 has none" : "")) +
      "; “n/a” marks a figure with nothing to divide by.</p>";
  }

  // The models table's head sticks to the top of its box (viewer.css), a box no higher than the
  // window; once the page itself has scrolled the box's top out of the window (past the end of
  // the box's own scrolling, or by the page's scroll bar or keys), the head went with it and the
  // rows in view had no model names over them. Its offset follows the window's top down the box.
  function keepHeadInView() {
    const wrap = $("summary-table");
    const box = wrap.getBoundingClientRect();
    const value = `${Math.min(Math.max(0, -box.top), box.height)}px`;
    if (wrap.style.getPropertyValue("--head-top") !== value) wrap.style.setProperty("--head-top", value);
  }

  // ---- filters and pages -------------------------------------------------------------------

  const opt = (value, label, selected) =>
    `<option value="${value}"${selected ? " selected" : ""}>${esc(label)}</option>`;

  // Per evaluator, the verdicts it gave to some pair of these runs (in the index's order). Any
  // other (CASCADE under A+A', which has no cascade filter) could only show "No audit matches".
  let verdictsGiven = [];

  function fillVerdicts() {
    const given = verdictsGiven[state.evaluator];
    if (!given.includes(state.verdict)) state.verdict = -1;
    $("f-verdict").innerHTML = opt(-1, "any", state.verdict === -1) +
      given.map((code) => opt(code, index.verdicts[code].name, code === state.verdict)).join("");
  }

  function fillFilters() {
    verdictsGiven = index.evaluators.map((_, e) => {
      let mask = 0;
      for (const m of index.audits.vmask) mask |= m[e];
      return index.verdicts.map((_v, code) => code).filter((code) => mask & (1 << code));
    });
    $("f-evaluator").innerHTML = index.evaluators
      .map((ev, i) => opt(i, `${ev.label}: ${ev.meaning}`, i === state.evaluator)).join("");
    fillVerdicts();
    $("f-model").innerHTML = opt(-1, "all", true) +
      index.models.map((m, i) => opt(i, m.label, false)).join("");
    $("f-sort").innerHTML = SORTS.map((o) => opt(o.key, o.label, o.key === state.sort)).join("");
    const verdictKey = index.verdicts.map((v, i) =>
      `<span class="chip v${i}">${esc(v.name)}</span>`).join(" ");
    $("key").innerHTML =
      `<span class="key-title">key:</span> ${verdictKey} ` +
      '<span class="chip gold-key">★ gold premise of the aligned proof step</span> ' +
      '<span class="chip fp-key">FP: dependent verdict, not a gold premise</span> ' +
      '<span class="chip ignored-key">ignored: gold premise judged INSENSITIVE</span> ' +
      '<span class="chip blind-key">blind spot †: an entity-introduction gold premise INSENSITIVE under A, ' +
      'which counts every use of one as ignored (not a finding)</span> ' +
      '<span class="chip expected-key">muted: not a gold premise, judged not dependent (as expected)</span>' +
      " · click a pair to compare the original chain of thought with the probe’s";
  }

  function auditMatches(i) {
    const A = index.audits;
    const e = state.evaluator;
    if (state.model >= 0 && A.model[i] !== state.model) return false;
    if (state.rawr && !A.rawr[i][e]) return false;
    const mask = state.fp ? A.fpmask[i][e] : A.vmask[i][e];
    if (state.fp && !mask) return false;
    if (state.verdict >= 0 && !(mask & (1 << state.verdict))) return false;
    if (state.problem && !index.problems[A.problem[i]].includes(state.problem)) return false;
    return true;
  }

  function pairShown(pair) {
    const e = state.evaluator;
    if (state.verdict >= 0 && pair.verdicts[e] !== state.verdict) return false;
    if (state.fp && !(pair.flags & (1 << (index.fp_shift + e)))) return false;
    return true;
  }

  function refilter() {
    matches = [];
    const n = index.audits.model.length;
    for (let i = 0; i < n; i++) if (auditMatches(i)) matches.push(i);
    if (state.sort) {
      const e = state.evaluator;
      const blind = blindSpot(e);
      const value = new Int32Array(n);
      for (const i of matches) value[i] = sortValue(state.sort, i, e, blind);
      // Most first; ties in the default order (matches holds the audits in it).
      matches.sort((a, b) => value[b] - value[a] || a - b);
    }
    state.page = 0;
  }

  // The cards' orders besides the default (problem id, then run, then model). Each ranks by a
  // count of the chosen evaluator's, from the index (data.py: per audit and evaluator), most
  // first; ties keep the default order. An entity-introduction premise INSENSITIVE under an
  // evaluator with A's blind spot is not ranked as ignored: its card marks it "blind spot †",
  // not "ignored", and the report calls it no finding about the model.
  const SORTS = [
    { key: "", label: "problem id" },
    { key: "ignored", label: "most ignored gold premises first" },
    { key: "fp", label: "most false positives first" },
  ];
  const plural = (n, one, many) => `${int(n)} ${n === 1 ? one : many}`;
  function sortValue(sort, i, e, blind = blindSpot(e)) {
    const A = index.audits;
    if (sort === "ignored") return A.ignored_rule[i][e] + (blind ? 0 : A.ignored_entity[i][e]);
    if (sort === "fp") return A.false_positives[i][e];
    return 0;
  }

  // The sort key's value on a card (under a non-default order), so that a reader sees why it
  // stands where it does; the ignored pairs A's blind spot makes are named as not ranked.
  function rankHtml(i, e) {
    const n = sortValue(state.sort, i, e);
    if (state.sort === "fp") {
      return `<span class="rank${n ? " hot fp" : ""}" data-rank="${n}">${plural(n, "false positive", "false positives")}</span>`;
    }
    const blind = blindSpot(e) ? index.audits.ignored_entity[i][e] : 0;
    return `<span class="rank${n ? " hot" : ""}" data-rank="${n}">${plural(n, "ignored gold premise use", "ignored gold premise uses")}` +
      (blind ? ` <span class="rank-blind" title="${esc(BLIND_TITLE)}">(+${int(blind)} blind spot †, not ranked)</span>` : "") +
      "</span>";
  }

  function pagerHtml(pages) {
    const total = matches.length;
    const first = total ? state.page * state.size + 1 : 0;
    const last = Math.min(total, (state.page + 1) * state.size);
    const all = index.audits.model.length;
    const dis = (cond) => (cond ? " disabled" : "");
    return (
      `<button type="button" data-go="first"${dis(state.page === 0)}>« first</button>` +
      `<button type="button" data-go="prev"${dis(state.page === 0)}>‹ previous</button>` +
      `<span class="page-of">page <input type="number" class="page-input" min="1" max="${Math.max(pages, 1)}" value="${state.page + 1}"> of <span class="pages">${int(Math.max(pages, 1))}</span></span>` +
      `<button type="button" data-go="next"${dis(state.page >= pages - 1)}>next ›</button>` +
      `<button type="button" data-go="last"${dis(state.page >= pages - 1)}>last »</button>` +
      `<span class="showing">audits <span class="range">${int(first)}–${int(last)}</span> of ` +
      `<span class="matching">${int(total)}</span> shown` +
      (total === all ? "" : ` (${int(all)} in all)`) + "</span>"
    );
  }

  let renderSerial = 0;
  async function renderPage() {
    const serial = ++renderSerial;
    const started = performance.now();
    const pages = Math.ceil(matches.length / state.size);
    if (state.page >= pages) state.page = Math.max(0, pages - 1);
    const slice = matches.slice(state.page * state.size, (state.page + 1) * state.size);
    const chunks = [...new Set(slice.map((i) => index.audits.chunk[i]))];
    const decoded = await Promise.all(chunks.map(loadChunk));
    if (serial !== renderSerial) return; // a newer render started meanwhile
    const byAudit = new Map();
    for (const m of decoded) for (const [k, v] of m) byAudit.set(k, v);
    const html = slice.map((i) => auditHtml(i, byAudit.get(i))).join("");
    $("audits").innerHTML = html || '<p class="empty">No audit matches these filters.</p>';
    replaceKeepingFocus($("pager-top"), pagerHtml(pages));
    replaceKeepingFocus($("pager-bottom"), pagerHtml(pages));
    document.body.dataset.ready = "true";
    document.body.dataset.renders = String(serial); // tests wait on it after an action
    document.body.dataset.renderMs = (performance.now() - started).toFixed(1); // benchmarks
  }

  // ---- one audit (a model on a problem) --------------------------------------------------------

  // "R_INSENSITIVE_NO_CHANGE" under INSENSITIVE -> "no change" (the cell names the verdict).
  const shortRule = (rule, verdict) => {
    if (!rule) return "";
    let text = String(rule).replace(/^R_/, "");
    const prefix = String(verdict || "").replace(/-/g, "_") + "_";
    if (text.startsWith(prefix)) text = text.slice(prefix.length);
    const words = { ORIG: "original", SUR: "surface", SEM: "probes", PRED: "predicate" };
    return text.split("_").map((w) => words[w] || w).join(" ").toLowerCase();
  };
  const shortSeal = (seal) => (seal ? String(seal).slice(0, 8) : "");
  const isNegative = (code) => !index.verdicts[code].positive && !index.verdicts[code].skipped;

  function answerText(value) {
    if (value === true) return "True";
    if (value === false) return "False";
    return "unread";
  }

  // A step's 1-based position among its text's steps. A restarted chain writes "Step 1" twice,
  // so a pair names its step, and its probe counterpart, by position (the certificate's
  // cot_index and probe_step_index); a certificate older than them, by number: the first step
  // written with it. Null where the text has no such step.
  function stepPosition(steps, position, number) {
    if (position !== null && position !== undefined) return position;
    if (number === null || number === undefined) return null;
    const k = steps.findIndex(([n]) => n === number);
    return k >= 0 ? k + 1 : null;
  }

  // "Step 1", or where the chain wrote that number before (a restarted chain), "Step 1 (2nd
  // time)": the rows, the cells' accessible names and a comparison's title tell them apart.
  function stepName(steps, pair) {
    const at = stepPosition(steps, pair.index, pair.step);
    const times = at === null ? 1 : Math.max(1, steps.slice(0, at).filter(([n]) => n === pair.step).length);
    const last = times % 10, teen = Math.floor(times / 10) % 10 === 1;
    const nth = `${times}${teen ? "th" : ["th", "st", "nd", "rd"][last] || "th"}`;
    return `Step ${pair.step}${times > 1 ? ` (${nth} time)` : ""}`;
  }

  function auditHtml(i, audit) {
    const A = index.audits;
    const e = state.evaluator;
    const model = index.models[A.model[i]];
    const problem = audit.problemEntry;
    const original = audit.original.length ? audit.texts[audit.original[0]] : null;
    const modelAnswer = original ? original[2] : null;
    const origSteps = original ? original[1] : [];
    const correct = A.correct[i];
    const rawr = A.rawr[i][e];
    const premises = problem.premises || [];
    const distractors = new Set(problem.distractors || []);
    // The pairs by their step's position in the original (one row each, as the chain has
    // them), then premise; a step the text lacks after those it has.
    const byStep = new Map();
    for (const [n, pair] of audit.pairs.entries()) {
      const at = stepPosition(origSteps, pair.index, pair.step) ?? origSteps.length + 1 + Number(pair.step);
      if (!byStep.has(at)) byStep.set(at, new Map());
      byStep.get(at).set(pair.premise, n);
    }
    const failed = original ? original[3] : null; // the original request's error, if it failed
    const answered = failed ? "no answer (the request failed)" : `answered ${answerText(modelAnswer)}`;
    const badges = state.sort ? [rankHtml(i, e)] : [];
    badges.push(
      `<span class="answer ${correct ? "ok" : "wrong"}">${answered}, gold ${answerText(problem.answer)} ${correct ? "✓" : "✗"}</span>`);
    const both = index.evaluators.findIndex((x) => x.key === "combined");
    if (rawr && blindSpot(e) && !A.rawr[i][both]) {
      // Under A alone, not under A+A′: said as what it is, not as a finding about the model.
      badges.push(`<span class="badge rawr blind" title="${esc(BLIND_TITLE)}">right answer, wrong ` +
        `reasoning under ${esc(evaluatorLabel(e))} † only, not under ${esc(evaluatorLabel(both))}</span>`);
    } else if (rawr) {
      badges.push('<span class="badge rawr">right answer, wrong reasoning</span>');
    }
    // Ordered by false positives, the card's count says it already.
    if (A.fpmask[i][e] && state.sort !== "fp") badges.push('<span class="badge fp">false positive</span>');
    if (problem.hops) badges.push(`<span class="hops">${problem.hops}-step proof</span>`);
    const premiseList = premises.map(([pid, text]) =>
      `<li><b class="pid">${esc(pid)}</b> ${esc(text)}${distractors.has(pid) ? ' <i class="tag">distractor</i>' : ""}</li>`
    ).join("");
    const proofList = (problem.proof || []).map(([step, conclusion, deps]) =>
      `<li><b class="pid">S${esc(step)}</b> <code>${esc(conclusion)}</code> <span class="deps">from ${esc(deps.join(", "))}</span></li>`
    ).join("");
    let rows = "";
    const positions = [...byStep.keys()].sort((a, b) => a - b);
    for (const at of positions) {
      const cells = byStep.get(at);
      let anyShown = false;
      let stepPair = null;
      let tds = "";
      for (const [pid] of premises) {
        const n = cells.get(pid);
        if (n === undefined) { tds += '<td class="none">·</td>'; continue; }
        const pair = audit.pairs[n];
        stepPair = stepPair || pair;
        if (!pairShown(pair)) { tds += '<td class="filtered" aria-hidden="true"></td>'; continue; }
        anyShown = true;
        tds += `<td>${pairButton(i, n, pair, e, stepName(origSteps, pair))}</td>`;
      }
      if (!anyShown) continue;
      const proof = stepPair && stepPair.proof_step !== null ? `proof S${stepPair.proof_step}` : "not aligned";
      const text = at <= origSteps.length ? origSteps[at - 1][1] : "";
      rows += `<tr><th scope="row" class="step"><b>${esc(stepName(origSteps, stepPair))}</b> <span class="aligned">→ ${proof}</span>` +
        `<div class="step-text">${esc(text)}</div></th>${tds}</tr>`;
    }
    const heads = premises.map(([pid, text]) => `<th scope="col" title="${esc(text)}">${esc(pid)}</th>`).join("");
    const table = audit.pairs.length
      ? `<div class="pairs-wrap"><table class="pairs"><thead><tr><th scope="col">step of the chain of thought</th>${heads}</tr></thead><tbody>${rows}</tbody></table></div>`
      : '<p class="empty">No (step, premise) pair was audited for this model on this problem.</p>';
    return (
      `<article class="audit" data-audit="${i}" data-model="${esc(model.label)}" data-problem="${esc(problem.id)}">` +
      `<header class="audit-head"><h3><span class="problem-id">${esc(problem.id)}</span> ` +
      `<span class="model-tag m${A.model[i] % 8}">${esc(model.label)}</span></h3>${badges.join(" ")}</header>` +
      `<div class="problem"><div><h4>Premises</h4><ol class="premises">${premiseList}</ol></div>` +
      `<div><h4>Question</h4><p class="question">${esc(problem.question)}</p>` +
      `<h4>Gold proof</h4><ol class="proof">${proofList}</ol></div></div>` +
      (failed ? `<p class="error request-error">The model’s request failed: ${esc(failed)}</p>` : "") +
      table + "</article>"
    );
  }

  const BLIND_TITLE = "A’s blind spot: renaming a predicate in every premise leaves an " +
    "entity-introduction premise true, so A counts every use of one as ignored, used or not";

  function pairButton(i, n, pair, e, step) {
    const code = pair.verdicts[e];
    const verdict = code === null || code === undefined ? "—" : index.verdicts[code].name;
    const gold = pair.flags & FLAG.gold;
    const fp = pair.flags & (1 << (index.fp_shift + e));
    const ignored = pair.flags & (1 << (index.ignored_shift + e));
    const evaluable = pair.flags & FLAG.evaluable;
    const classes = ["pair", code === null || code === undefined ? "vnone" : `v${code}`];
    if (gold) classes.push("gold");
    // Not a gold premise and judged not dependent: what the audit expects; muted, so that the
    // cells a reader should look at (ignored gold premises, false positives) stand out.
    if (!gold && evaluable && code !== null && code !== undefined && isNegative(code)) {
      classes.push("expected");
    }
    if (!evaluable) classes.push("excluded");
    if (fp) classes.push("fp");
    const star = gold ? '<span class="star" title="gold premise">★</span>' : "";
    // An entity-introduction premise "ignored" under A is its blind spot, whatever the model did.
    const blindMark = ignored && (pair.flags & FLAG.entity) && blindSpot(e);
    const marks = (fp ? '<span class="mark fp">FP</span>' : "") +
      (blindMark ? `<span class="mark blind" title="${esc(BLIND_TITLE)}">blind spot †</span>` : "") +
      (ignored && !blindMark ? '<span class="mark ignored">ignored</span>' : "") +
      (!evaluable ? '<span class="mark out">excluded</span>' : "");
    // What the cell shows by its border, star, marks and muting, said in words too.
    const rule = shortRule(pair.rules[e], verdict);
    const said = [`${step.toLowerCase()} × ${pair.premise}: ${verdict}${rule ? ` (${rule})` : ""}`];
    if (gold) said.push("gold premise");
    if (fp) said.push("false positive");
    if (blindMark) said.push("blind spot †");
    else if (ignored) said.push("ignored");
    if (!evaluable) said.push("excluded from the metrics");
    if (classes.includes("expected")) said.push("as expected");
    said.push(`seal ${shortSeal(pair.seal)}`);
    return `<button type="button" class="${classes.join(" ")}" data-audit="${i}" data-pair="${n}" ` +
      `title="${esc(pair.id)}" aria-label="${esc(said.join("; "))}">${star}<span class="verdict">${esc(verdict)}</span>` +
      `<span class="rule">${esc(rule)}</span>` +
      `<span class="foot"><code class="seal">${esc(shortSeal(pair.seal))}</code>${marks}</span></button>`;
  }

  // ---- one pair: the original chain of thought beside the probe's ------------------------------

  // Words, runs of space and single other characters, so "clolvuses," marks the word alone.
  function tokens(text) {
    return String(text || "").match(/[\p{L}\p{N}_]+|\s+|[^\p{L}\p{N}_\s]/gu) || [];
  }

  // Word-level longest common subsequence: which words of each side the other lacks.
  function diffWords(a, b) {
    const A = tokens(a), B = tokens(b);
    const n = A.length, m = B.length;
    const L = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
    for (let x = n - 1; x >= 0; x--) for (let y = m - 1; y >= 0; y--)
      L[x][y] = A[x] === B[y] ? L[x + 1][y + 1] + 1 : Math.max(L[x + 1][y], L[x][y + 1]);
    const keepA = new Array(n).fill(false), keepB = new Array(m).fill(false);
    let x = 0, y = 0;
    while (x < n && y < m) {
      if (A[x] === B[y]) { keepA[x] = keepB[y] = true; x++; y++; }
      else if (L[x + 1][y] >= L[x][y + 1]) x++;
      else y++;
    }
    const render = (T, keep, cls) => T.map((t, k) =>
      keep[k] || /^\s+$/.test(t) ? esc(t) : `<mark class="${cls}">${esc(t)}</mark>`).join("");
    return [render(A, keepA, "del"), render(B, keepB, "ins")];
  }

  function stepRows(audit, pair, c, repeat) {
    const ci = c; // index among the probe conditions
    const original = audit.original.length ? audit.texts[audit.original[0]] : null;
    const probeIds = (audit.probes[pair.premise] || [])[ci] || [];
    const probe = probeIds.length ? audit.texts[probeIds[Math.min(repeat, probeIds.length - 1)]] : null;
    const origSteps = original ? original[1] : [];
    const probeSteps = probe ? probe[1] : [];
    // Steps by position on both sides (stepPosition): a restarted chain repeats its numbers.
    const at = (p) => stepPosition(origSteps, p.index, p.step);
    const counterpart = (p) => stepPosition(probeSteps, (p.probe_index || [])[ci], p.probe_steps[ci]);
    const samePremise = new Map(); // position in the original -> this premise's pair there
    for (const p of audit.pairs) {
      const k = p.premise === pair.premise ? at(p) : null;
      if (k !== null) samePremise.set(k, p);
    }
    const used = new Set(); // positions in the probe's output that some original step aligns to
    for (const p of samePremise.values()) {
      const k = counterpart(p);
      if (k !== null) used.add(k);
    }
    const rows = [];
    let cursor = 0; // the probe's steps shown so far (or passed)
    const flushProbeUntil = (limit) => {
      while (cursor < probeSteps.length && (limit === null || cursor + 1 < limit)) {
        const [k, t] = probeSteps[cursor++];
        if (!used.has(cursor)) rows.push({ orig: null, probe: [k, t], p: null, at: null });
      }
    };
    origSteps.forEach(([n, t], j) => {
      const p = samePremise.get(j + 1) || null;
      const k = p ? counterpart(p) : null;
      if (k !== null) {
        flushProbeUntil(k);
        cursor = Math.max(cursor, k);
      }
      const aligned = k !== null && k <= probeSteps.length ? probeSteps[k - 1] : null;
      rows.push({ orig: [n, t], probe: aligned, p, at: j + 1 });
    });
    flushProbeUntil(null);
    return { rows, original, probe, probeIds, at: at(pair) };
  }

  function conclusionLine(p, ci) {
    const before = p.phi[0], after = p.phi[1 + ci], delta = p.delta[ci];
    if (delta === true && p.align[1 + ci] === "vanished") {
      return `<div class="conclusion changed"><span class="label">conclusion vanished</span> ` +
        `the probe’s output, read whole, no longer reaches <code>${esc(before)}</code> ` +
        "while the surface control still does: read as a change</div>";
    }
    if (delta === true) {
      const [a, b] = diffWords(before, after);
      return `<div class="conclusion changed"><span class="label">conclusion changed</span> <code>${a}</code> → <code>${b}</code></div>`;
    }
    if (delta === false) return `<div class="conclusion same"><span class="label">conclusion unchanged</span> <code>${esc(before)}</code></div>`;
    const why = p.probe_steps[ci] === null
      ? "the probe’s output has no step aligned to this one"
      : "one side was not read as a proposition";
    return `<div class="conclusion unknown"><span class="label">no comparison</span> ${why}` +
      (before ? ` (original <code>${esc(before)}</code>)` : "") + "</div>";
  }

  function comparisonHtml(audit, pair, ci, repeat) {
    const { rows, original, probe, probeIds, at } = stepRows(audit, pair, ci, repeat);
    const cond = index.probe_conditions[ci];
    let body = "";
    for (const r of rows) {
      const focus = r.orig && r.at === at;
      const p = r.p;
      const changed = p && p.delta[ci] === true;
      const cls = ["sxs-row", focus ? "focus" : "", changed ? "changed" : "", r.orig && !r.probe ? "orphan" : ""].join(" ");
      let left = r.orig ? esc(r.orig[1]) : "";
      let right = r.probe ? esc(r.probe[1]) : "";
      if (changed && r.orig && r.probe) [left, right] = diffWords(r.orig[1], r.probe[1]);
      const rule = p ? (p.align[1 + ci] || (r.probe ? "" : "missing")) : "";
      // Each row's state in words beside the alignment rule, not in a tint alone (which a
      // colour-blind reader or a greyscale print does not tell from white).
      const said = focus ? "this pair’s step" : changed ? "changed" : "";
      body +=
        `<div class="${cls}" data-step="${r.orig ? r.orig[0] : ""}" data-probe-step="${r.probe ? r.probe[0] : ""}"` +
        `${focus ? ' aria-current="step"' : ""}>` +
        `<div class="side orig">${r.orig ? `<b>Step ${esc(r.orig[0])}</b> ${left}` : '<span class="gap">(no step)</span>'}</div>` +
        `<div class="join" title="alignment rule">${r.orig && r.probe ? "⟷" : ""}<span>${esc(rule)}</span>` +
        `${said ? `<span class="row-state">${said}</span>` : ""}</div>` +
        `<div class="side probe">${r.probe ? `<b>Step ${esc(r.probe[0])}</b> ${right}` : '<span class="gap">(no counterpart)</span>'}</div>` +
        (focus && p ? `<div class="focus-line">${conclusionLine(p, ci)}</div>` : "") +
        "</div>";
    }
    const answers =
      `<div class="sxs-row answers"><div class="side orig">Answer: ${answerText(original ? original[2] : null)}</div><div class="join"></div>` +
      `<div class="side probe">Answer: ${answerText(probe ? probe[2] : null)}</div></div>`;
    const repeats = probeIds.length > 1
      ? `<p class="repeats">This probe was sent ${probeIds.length} times; the verdict used the majority conclusion. Showing repeat ` +
        probeIds.map((_, k) => `<button type="button" class="repeat${k === repeat ? " on" : ""}" data-repeat="${k}" ` +
          `aria-pressed="${k === repeat}">${k + 1}</button>`).join(" ") + "</p>"
      : "";
    const err = probe && probe[3] ? `<p class="error">The probe request failed: ${esc(probe[3])}</p>` : "";
    const raw = `<details class="raw"><summary>raw outputs</summary><div class="raw-grid">` +
      `<pre class="raw-text orig">${esc(original ? original[0] : "")}</pre><pre class="raw-text probe">${esc(probe ? probe[0] : "(no output)")}</pre></div></details>`;
    return (
      repeats + err +
      `<div class="sxs" data-condition="${cond}"><div class="sxs-row sxs-head"><div class="side orig">original chain of thought</div>` +
      `<div class="join"></div><div class="side probe">${esc(cond)} probe’s chain of thought</div></div>${body}${answers}</div>` + raw
    );
  }

  let dialogState = null;

  function showProbe(ci, fromAddress = false) {
    dialogState.ci = ci;
    dialogState.repeat = 0;
    renderDialog();
    if (!fromAddress) saveView(false); // a tab is a detail of the pair's view, not a step back
  }

  // Opened by the reader, a pair is a view of its own in the history (Back closes it); opened
  // from the address (a reload, Forward, a link), it shows the probe the address names.
  function openPair(i, n, { probe = null, fromAddress = false } = {}) {
    const k = index.audits.chunk[i];
    return loadChunk(k).then((byAudit) => {
      const audit = byAudit.get(i);
      const pair = audit && audit.pairs[n];
      if (!pair) { // an address naming no pair of this page: the view without it
        if (fromAddress) saveView(false);
        return;
      }
      const firstChanged = pair.delta.findIndex((d) => d === true);
      const ci = probe !== null ? probe : firstChanged >= 0 ? firstChanged : 0;
      dialogState = { i, n, audit, pair, ci, repeat: 0 };
      renderDialog();
      const dialog = $("pair-dialog");
      if (!dialog.open) dialog.showModal();
      dialog.scrollTop = 0; // a new pair starts at its top, not where the last one was left
      dialog.dataset.pair = pair.id;
      if (!fromAddress) saveView(true, { pairOpened: true });
    });
  }

  function renderDialog() {
    const { i, audit, pair, ci, repeat } = dialogState;
    const model = index.models[index.audits.model[i]];
    const run = index.runs[model.run];
    const problem = audit.problemEntry;
    const premiseText = ((problem.premises || []).find(([pid]) => pid === pair.premise) || [])[1] || "";
    const subst = audit.substitutions[pair.premise];
    const substText = subst ? Object.entries(subst).map(([a, b]) => `${esc(a)} → ${esc(b)}`).join(", ") : "none";
    const verdictRows = index.evaluators.map((ev, e) => {
      const code = pair.verdicts[e];
      const name = code === null || code === undefined ? "—" : index.verdicts[code].name;
      const current = e === state.evaluator;
      return `<tr class="${current ? "current" : ""}"${current ? ' aria-current="true"' : ""}><th>${esc(ev.label)}</th>` +
        `<td><span class="chip v${code}">${esc(name)}</span></td><td><code>${esc(pair.rules[e] || "")}</code></td></tr>`;
    }).join("");
    const gold = pair.flags & FLAG.gold
      ? `a direct premise of proof step S${esc(pair.proof_step)}`
      : pair.proof_step === null ? "the step is not aligned to the proof" : `not a premise of proof step S${esc(pair.proof_step)}`;
    const tabs = index.probe_conditions.map((c, k) => {
      const d = pair.delta[k];
      const note = d === true
        ? (pair.align[1 + k] === "vanished" ? "vanished" : "changed")
        : d === false ? "unchanged" : "no comparison";
      // WAI-ARIA tabs: only the selected tab is in the Tab order; the arrow keys move between them.
      return `<button type="button" role="tab" id="probe-tab-${k}" class="tab${k === ci ? " on" : ""}" data-condition="${k}" ` +
        `aria-selected="${k === ci}" aria-controls="probe-panel" tabindex="${k === ci ? 0 : -1}">${esc(c)} probe <span class="tab-note">${note}</span></button>`;
    }).join("");
    const steps = audit.original.length ? audit.texts[audit.original[0]][1] : [];
    $("pair-title").innerHTML = `${esc(problem.id)} · ${esc(model.label)} · ${esc(stepName(steps, pair))} × ${esc(pair.premise)}`;
    replaceKeepingFocus($("pair-body"),
      '<div class="facts">' +
      `<div><h4>Premise ${esc(pair.premise)}</h4><p>${esc(premiseText)}</p>` +
      `<p class="sub">${gold}${pair.flags & FLAG.entity ? "; introduces the entity" : ""}</p>` +
      `<p class="sub">substitution: ${substText}</p>` +
      (pair.evidence ? `<p class="sub">citation: ${esc(pair.evidence)}</p>` : "") +
      (pair.excluded.length ? `<p class="sub">excluded from the metrics: ${esc(pair.excluded.join(", "))}</p>` : "") +
      (pair.fp_cause ? `<p class="fp-cause"><b>false positive of A:</b> ${esc(pair.fp_cause)}</p>` : "") +
      "</div>" +
      `<div><h4>Verdicts</h4><table class="verdicts">${verdictRows}</table></div>` +
      `<div><h4>Certificate</h4><p><code class="pair-id">${esc(pair.id)}</code></p>` +
      `<p class="seal-full">seal <code>${esc(pair.seal)}…</code></p>` +
      `<p class="sub">the first ${index.seal_digits} of the seal’s 64 hex digits (sha256); the whole ` +
      `certificate is line ${int(pair.line)} of ${esc(run.eval_dir)}/certificates.jsonl, and ` +
      "<code>cotaudit verify</code> recomputes every seal from the raw outputs</p></div></div>" +
      `<div class="tabs" role="tablist" aria-label="probes">${tabs}</div>` +
      `<div id="probe-panel" role="tabpanel" aria-labelledby="probe-tab-${ci}">` +
      comparisonHtml(audit, pair, ci, repeat) + "</div>");
  }

  // ---- the address: the view in the URL's fragment ---------------------------------------------

  // The filters, the order, the page, "show more rows" and the open pair (with its probe) live in
  // location.hash, so that a reload shows the same view, Back and Forward step through the views
  // (Back first closes a pair the reader opened), and a view or a pair can be linked to. A file://
  // page has nowhere else to keep them. Values are names (the evaluator's key, the verdict, the
  // model's label), not the page's internal numbers; an unknown one falls back to its default.
  // A pair is "AUDIT.PAIR", the page's own numbering, the same on a page rebuilt from the same runs.
  const DEFAULT_SIZE = 20;
  let lastSaveTyped = false; // typing in the problem box updates one history entry, not one a key
  let appliedHash = null; // the address the view shows

  function viewHash() {
    const h = new URLSearchParams();
    if (state.evaluator !== 0) h.set("evaluator", index.evaluators[state.evaluator].key);
    if (state.verdict >= 0) h.set("verdict", index.verdicts[state.verdict].name);
    if (state.model >= 0) h.set("model", index.models[state.model].label);
    if (state.rawr) h.set("rawr", "1");
    if (state.fp) h.set("fp", "1");
    if (state.problem) h.set("problem", state.problem);
    if (state.sort) h.set("sort", state.sort);
    if (state.size !== DEFAULT_SIZE) h.set("size", String(state.size));
    if (state.page > 0) h.set("page", String(state.page + 1));
    if (moreRowsShown) h.set("more", "1");
    if (dialogState && $("pair-dialog").open) {
      h.set("pair", `${dialogState.i}.${dialogState.n}`);
      h.set("probe", index.probe_conditions[dialogState.ci]);
    }
    const text = h.toString();
    return text ? `#${text}` : "";
  }

  function saveView(push, extra = {}) {
    const hash = viewHash();
    if (hash === location.hash) return;
    const url = location.href.split("#")[0] + hash;
    if (push) history.pushState(extra, "", url);
    else history.replaceState(history.state, "", url);
    appliedHash = location.hash;
  }

  function viewFromHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    const find = (list, name, key) => (h.has(name) ? list.findIndex((x) => x[key] === h.get(name)) : -1);
    const sizes = [...$("f-size").options].map((o) => Number(o.value));
    const size = Number(h.get("size"));
    const page = Math.floor(Number(h.get("page")));
    const want = {
      evaluator: Math.max(0, find(index.evaluators, "evaluator", "key")),
      verdict: find(index.verdicts, "verdict", "name"),
      model: find(index.models, "model", "label"),
      rawr: h.get("rawr") === "1",
      fp: h.get("fp") === "1",
      problem: (h.get("problem") || "").trim(),
      sort: SORTS.some((o) => o.key && o.key === h.get("sort")) ? h.get("sort") : "",
      size: sizes.includes(size) ? size : DEFAULT_SIZE,
      page: page >= 1 ? page - 1 : 0,
      more: h.get("more") === "1",
      pair: null,
      probe: Math.max(0, index.probe_conditions.indexOf(h.get("probe"))),
    };
    const pair = /^(\d+)\.(\d+)$/.exec(h.get("pair") || "");
    if (pair && Number(pair[1]) < index.audits.model.length) want.pair = [Number(pair[1]), Number(pair[2])];
    return want;
  }

  // Show the view the address names (at load, and on Back, Forward or an edited address),
  // redrawing only what differs, so that a control keeps its focus where nothing changed.
  async function applyHash(initial = false) {
    // Back and Forward fire both popstate and hashchange; the address is applied once.
    if (!initial && location.hash === appliedHash) return;
    appliedHash = location.hash;
    const want = viewFromHash();
    const before = filterKey();
    const pageBefore = state.page;
    const summaryBefore = `${state.evaluator} ${moreRowsShown}`;
    $("f-evaluator").value = String(want.evaluator);
    state.evaluator = want.evaluator;
    state.verdict = want.verdict;
    fillVerdicts(); // a verdict this evaluator never gave falls back to any
    $("f-model").value = String(want.model);
    $("f-rawr").checked = want.rawr;
    $("f-fp").checked = want.fp;
    $("f-problem").value = want.problem;
    $("f-sort").value = want.sort;
    $("f-size").value = String(want.size);
    moreRowsShown = want.more;
    readFilters();
    if (initial || `${state.evaluator} ${moreRowsShown}` !== summaryBefore) renderSummary();
    const filtersChanged = filterKey() !== before;
    if (initial || filtersChanged) refilter();
    state.page = want.page;
    if (initial || filtersChanged || state.page !== pageBefore) await renderPage();
    const dialog = $("pair-dialog");
    if (want.pair) {
      const [i, n] = want.pair;
      if (!(dialog.open && dialogState && dialogState.i === i && dialogState.n === n)) {
        await openPair(i, n, { probe: want.probe, fromAddress: true });
      } else if (dialogState.ci !== want.probe) {
        showProbe(want.probe, true);
      }
    } else if (dialog.open) {
      dialog.close();
    }
    saveView(false); // the address says what is shown (a page past the last, an unknown name)
  }

  // ---- wiring ------------------------------------------------------------------------------

  function readFilters() {
    state.evaluator = Number($("f-evaluator").value);
    state.verdict = Number($("f-verdict").value);
    state.model = Number($("f-model").value);
    state.rawr = $("f-rawr").checked;
    state.fp = $("f-fp").checked;
    state.problem = $("f-problem").value.trim();
    state.sort = $("f-sort").value;
    state.size = Number($("f-size").value);
  }

  const filterKey = () => JSON.stringify([state.evaluator, state.verdict, state.model, state.rawr,
    state.fp, state.problem, state.sort, state.size]);

  function onFilterChange(event) {
    const summaryToo = event && event.target && event.target.id === "f-evaluator";
    const before = filterKey();
    readFilters();
    // The search box fires "change" again when it loses focus (to a click on a pair, say):
    // re-rendering then would replace the very button being clicked.
    if (filterKey() === before) return;
    if (summaryToo) fillVerdicts(); // may drop a verdict this evaluator never gave
    refilter();
    if (summaryToo) renderSummary();
    renderPage();
    const typed = Boolean(event && event.type === "input");
    saveView(!(typed && lastSaveTyped));
    lastSaveTyped = typed;
  }

  function wire() {
    const form = $("filters");
    form.addEventListener("change", onFilterChange);
    form.addEventListener("submit", (ev) => ev.preventDefault());
    $("f-problem").addEventListener("input", onFilterChange);
    for (const id of ["pager-top", "pager-bottom"]) {
      $(id).addEventListener("click", (ev) => {
        const go = ev.target.closest("button[data-go]");
        if (!go) return;
        const pages = Math.ceil(matches.length / state.size);
        const to = { first: 0, prev: state.page - 1, next: state.page + 1, last: pages - 1 }[go.dataset.go];
        state.page = Math.max(0, Math.min(pages - 1, to));
        saveView(true);
        lastSaveTyped = false;
        renderPage().then(() => {
          $("browser").scrollIntoView();
          // The view moves to the top of the list: so does the focus of the bottom pager's user.
          if (id === "pager-bottom" && $(id).contains(document.activeElement)) {
            focusIn($("pager-top"), focusKey(document.activeElement));
          }
        });
      });
      $(id).addEventListener("change", (ev) => {
        if (!ev.target.classList.contains("page-input")) return;
        const pages = Math.ceil(matches.length / state.size);
        state.page = Math.max(0, Math.min(pages - 1, Number(ev.target.value) - 1 || 0));
        saveView(true);
        lastSaveTyped = false;
        renderPage();
      });
    }
    $("audits").addEventListener("click", (ev) => {
      const button = ev.target.closest("button.pair");
      if (button) openPair(Number(button.dataset.audit), Number(button.dataset.pair));
    });
    $("pair-close").addEventListener("click", () => $("pair-dialog").close());
    $("summary-table").addEventListener("click", (ev) => {
      if (!ev.target.closest("#more-rows")) return;
      moreRowsShown = !moreRowsShown;
      renderSummary();
      saveView(false);
    });
    // However the dialog closes (Escape, the close button, the backdrop, Back): the address
    // drops the pair. A pair the reader opened here is the history entry before it, so closing it
    // goes back there (Forward reopens it); one opened from the address is replaced.
    $("pair-dialog").addEventListener("close", () => {
      if (!new URLSearchParams(location.hash.slice(1)).has("pair")) return; // Back closed it
      if (history.state && history.state.pairOpened) history.back();
      else saveView(false);
    });
    window.addEventListener("popstate", () => applyHash());
    window.addEventListener("scroll", keepHeadInView, { passive: true });
    window.addEventListener("resize", keepHeadInView);
    window.addEventListener("hashchange", () => applyHash());
    $("pair-dialog").addEventListener("click", (ev) => {
      if (ev.target === $("pair-dialog")) $("pair-dialog").close(); // the backdrop
      const tab = ev.target.closest("button[data-condition]");
      if (tab) showProbe(Number(tab.dataset.condition));
      const rep = ev.target.closest("button[data-repeat]");
      if (rep) { dialogState.repeat = Number(rep.dataset.repeat); renderDialog(); }
    });
    $("pair-dialog").addEventListener("keydown", (ev) => {
      const tab = ev.target.closest('[role="tab"]');
      if (!tab || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      const count = index.probe_conditions.length;
      const k = Number(tab.dataset.condition);
      const to = { ArrowRight: (k + 1) % count, ArrowLeft: (k + count - 1) % count, Home: 0, End: count - 1 }[ev.key];
      if (to === undefined) return;
      ev.preventDefault(); // no scrolling of the dialog as well
      showProbe(to);
      $(`probe-tab-${to}`).focus();
    });
  }

  async function start() {
    try {
      performance.mark("cotaudit-start");
      index = await decodeElement("d-index");
      performance.mark("cotaudit-index");
      FLAG = index.pair_flags;
      // The title (h1) names a single run by its label: the line gives only its directory.
      // Several runs are named by label in the table's run row, so the line maps each to its own.
      const path = (r) => `<code class="path" title="run directory">${esc(r.run_dir)}</code>`;
      const runs = index.runs.length === 1 ? path(index.runs[0]) :
        "runs " + index.runs.map((r) => `<b>${esc(r.label)}</b> ${path(r)}`).join("; ");
      $("runs").innerHTML = `${runs} · ` +
        `${int(index.problems.length)} problems, ${int(index.audits.model.length)} audits (a model on a problem) · ` +
        `written by ${esc(index.generator)} at ${esc(index.generated_at)}`;
      // A run whose stream holds less than its plan: said under the line, for each such run.
      const short = index.runs.filter((r) => r.incomplete);
      $("incomplete").hidden = short.length === 0;
      $("incomplete").innerHTML = short.map((r) =>
        `<b>Incomplete run${index.runs.length > 1 ? " " + esc(r.label) : ""}:</b> ${esc(r.incomplete).replace(/`([^`]+)`/g, "<code>$1</code>")}`
      ).join("<br>");
      fillFilters();
      wire();
      await applyHash(true); // the view the address names, if any (a reload keeps its view)
      performance.mark("cotaudit-interactive"); // the first page is shown and wired
    } catch (err) {
      $("runs").textContent = `This page could not read its data: ${err}`;
      document.body.dataset.ready = "error";
      throw err;
    }
  }

  start();
})();
