// Times and durations as people read them.

export function ms(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return "";
  const neg = n < 0 ? "-" : "";
  n = Math.abs(n);
  if (n < 999.5) return `${neg}${Math.round(n)} ms`;
  // Under 59.95 s: what shows as 60.0 s is a minute.
  if (n < 59950) return `${neg}${(n / 1000).toFixed(n < 10000 ? 2 : 1).replace(/\.?0+$/, "")} s`;
  // Rounded whole first, then split: 599.7 s is 10 min, not 9 min 60 s.
  const secs = Math.round(n / 1000);
  if (secs < 3600) {
    const m = Math.floor(secs / 60), s = secs % 60;
    return `${neg}${m} min${s ? ` ${s} s` : ""}`;
  }
  const mins = Math.round(n / 60000);
  const hr = Math.floor(mins / 60), m = mins % 60;
  if (hr < 48) return `${neg}${hr} h${m ? ` ${m} min` : ""}`;
  return `${neg}${Math.round(hr / 24)} d`;
}

export function time(t) {
  if (!t) return "";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3,
  });
}

/** The time of day, to the millisecond: for lines of one flow's log. */
export function clock(t) {
  if (!t) return "";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit",
    fractionalSecondDigits: 3, hour12: false });
}

/** "3 min ago" / "in 4 s". */
export function relative(t, now = Date.now()) {
  if (!t) return "";
  const diff = new Date(t).getTime() - now;
  return diff >= 0 ? `in ${ms(diff)}` : `${ms(-diff)} ago`;
}

export function between(a, b) {
  if (!a) return "";
  const end = b ? new Date(b).getTime() : Date.now();
  return ms(end - new Date(a).getTime());
}

/** A <time> element whose text is kept up to date by `tick`. */
export function countdown(h, t, label) {
  return h("time", { datetime: t, class: "countdown", dataset: { until: t, label } },
    `${label} ${relative(t)}`);
}

/** Refresh every countdown on the page once a second. */
export function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll("time.countdown")) {
    const until = new Date(el.dataset.until).getTime();
    el.textContent = until > now
      ? `${el.dataset.label} in ${ms(until - now)}`
      : `${el.dataset.label} due`;
  }
  for (const el of document.querySelectorAll("time.age")) {
    el.textContent = relative(el.getAttribute("datetime"), now);
  }
}
