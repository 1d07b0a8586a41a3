"""viewgap's figures, drawn by tools/plot.py (its entry point and command line).

  files.py           reading JSON, CSV and .npy; writing through a temporary file
  tables.py          a sweep directory's tables, the old formats in the current one's terms
  style.py           backend, colours, markers, the chance line, the words of titles
  series.py          a sweep's mean-with-CI series, set apart sideways
  run_figures.py     one run's figures and the `run` command
  dump_figures.py    a run dump's figures (dataset samples, poses, reconstructions)
  sweep_figures.py   a sweep's figures against gap and distance, and the `sweep` command
  paired_figures.py  a sweep's paired differences
  frontier_figures.py a sweep's novel-versus-familiar frontier (frontier.csv), the published points marked
  norb_figures.py    a smallNORB-format directory's toys, viewpoints and lightings, and the `norb` command
  few_seeds.py       the note under statistics over fewer than 5 seeds, for the figures and tools/*.py's tables

Importing any of them but few_seeds.py (standard library only) selects matplotlib's Agg backend (style.py)."""
