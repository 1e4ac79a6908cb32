"""A readable table of memkit's statistics, in the manner of torch.cuda.memory_summary()."""


def _bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.2f %s" % (n / scale, unit)
    return "%d B" % n


def format_summary(stats, title, limits=None):
    """stats: a statistics dict (memkit.h's names); limits: optional dict of limits in
    bytes by label. Returns the table as one string."""
    rows = [
        ("Allocated memory", _bytes(stats["active_bytes"]), _bytes(stats["peak_active_bytes"])),
        ("Requested memory", _bytes(stats["requested_bytes"]),
         _bytes(stats["peak_requested_bytes"])),
        ("Reserved memory", _bytes(stats["reserved_bytes"]), _bytes(stats["peak_reserved_bytes"])),
        ("Cached (free) memory", _bytes(stats["cached_bytes"]), ""),
        ("Live blocks", str(stats["live_blocks"]), ""),
        ("Segments", str(stats["segments"]), ""),
    ]
    totals = [
        ("Allocations", stats["allocations"]), ("Frees", stats["frees"]),
        ("Cache hits", stats["cache_hits"]),
        ("Backend allocations", stats["backend_allocations"]),
        ("Backend frees", stats["backend_frees"]), ("Pages mapped", stats["maps"]),
        ("Pages unmapped", stats["unmaps"]), ("Retries after waiting", stats["retries"]),
        ("Out of memory", stats["out_of_memory"]),
    ]
    width = 76
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"
    lines = [rule, "|" + title.center(width - 2) + "|", rule,
             "| %-30s| %19s | %19s |" % ("Metric", "Current", "Peak"), thin]
    lines += ["| %-30s| %19s | %19s |" % row for row in rows]
    lines += [thin, "| %-30s| %41s |" % ("Counts", "Total"), thin]
    lines += ["| %-30s| %41d |" % row for row in totals]
    if limits:
        lines += [thin]
        lines += ["| %-30s| %41s |" % (label, _bytes(value)) for label, value in limits.items()]
    lines.append(rule)
    return "\n".join(lines)
