// Sort any table.sortable by a click on its column heading, and filter the index rows by the text typed into
// #filter. Each cell's data-sort attribute is its rank in its column, computed when the site was written
// (harness/report/site.py, sort_key: numbers by value, dates as dates, sweep run names by the swept value);
// a cell without one sorts by its text. No libraries, no network.
(function () {
  function key(cell) {
    var rank = cell.getAttribute("data-sort");
    return rank === null ? cell.textContent.trim().toLowerCase() : parseInt(rank, 10);
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th) {
      th.addEventListener("click", function () {
        var column = Array.prototype.indexOf.call(th.parentNode.children, th);
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("thead th").forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[column]), y = key(b.cells[column]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  var filter = document.getElementById("filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var needle = filter.value.toLowerCase();
      document.querySelectorAll("#index tbody tr").forEach(function (row) {
        row.hidden = needle !== "" && row.textContent.toLowerCase().indexOf(needle) < 0;
      });
    });
  }
})();
