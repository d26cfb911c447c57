"use strict";
async function refresh() {
  const stale = document.getElementById("stale");
  try {
    const r = await fetch(location.pathname, {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const fresh = new DOMParser().parseFromString(await r.text(), "text/html").getElementById("sections");
    if (!fresh) throw new Error("not a status page");
    document.getElementById("sections").replaceWith(fresh);
    stale.hidden = true;
  } catch (err) {
    stale.textContent = "The agent did not answer at " + new Date().toLocaleTimeString() +
      " (" + err.message + "): the figures below are older.";
    stale.hidden = false;
  }
}
setInterval(refresh, REFRESH * 1000);
