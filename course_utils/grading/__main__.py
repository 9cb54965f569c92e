"""``python -m course_utils.grading SUBMISSIONS --out RESULTS``: grade a class in one command.

It grades only inside a working bubblewrap sandbox, or without one when told ``--no-sandbox``;
otherwise it exits with status 2, saying why and how to fix it, before anything runs or is written.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from course_utils.grading.batch import Batch, assignment_of, course_notebooks, exercise_columns, in_shard, run_batch
from course_utils.grading.class_report import write_class_report
from course_utils.grading.lms import (CanvasProblem, add_canvas_options, canvas_option_problem, canvas_options,
                                      write_lms)
from course_utils.grading.regrade import CHANGED, headline, learner_line, write_regrade
from course_utils.grading.merge import folder_problem, shard_record, write_shard_record
from course_utils.grading.reports import counted, read_results, write_gradebook
from course_utils.grading.sandbox import SANDBOXED, Limits, SandboxUnavailable, choose_sandbox
from course_utils.grading.submissions import discover


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("write it as K/N, e.g. 1/4") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError("K must be between 1 and N")
    return k, n


class DefaultsShown(argparse.HelpFormatter):
    """``--help`` ends each option's text with its default, where it has one (not for a switch
    that is off unless given, nor an option that is unset unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "%(default)" in text or default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge"]:
        from course_utils.grading.merge import main as merge_main

        return merge_main(argv[1:])
    if argv[:1] == ["gradescope"]:
        from course_utils.grading.gradescope import main as gradescope_main

        return gradescope_main(argv[1:])
    return grade_main(argv)


# Files the results folder holds besides one NAME.json per learner.
REPORT_NAMES = {"class_report", "regrade", "gradebook", "canvas"}


def grade_main(argv: list[str]) -> int:
    defaults = Limits()
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.grading", formatter_class=DefaultsShown,
        description="Grade learners' notebooks: one folder per learner (SUBMISSIONS/alice/01_tensors.ipynb) "
        "or one file per learner (SUBMISSIONS/alice.ipynb). Also: `merge RESULTS... --out RESULTS` "
        "joins --shard runs (and, with --update, a regrade into the class's results); "
        "`gradescope --out autograder.zip --chapters 01` builds a Gradescope autograder for chapter 01.",
    )
    parser.add_argument("submissions", type=Path, help="the folder of the learners' submissions")
    parser.add_argument("--out", type=Path, required=True, help="results folder (created)")
    parser.add_argument("--course", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the course folder: by default the one this grader belongs to, here %(default)s")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="how many learners to grade at once: by default the number of cores, here %(default)s")
    parser.add_argument("--shard", type=_shard, metavar="K/N", help="grade part K of N of the learners")
    parser.add_argument("--cell-timeout", type=int, default=defaults.cell_timeout_s, metavar="SECONDS",
                        help="the longest one cell of a learner's notebook may run")
    parser.add_argument("--notebook-timeout", type=int, default=defaults.notebook_timeout_s, metavar="SECONDS",
                        help="the longest a learner's whole notebook may run")
    parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb, metavar="MB",
                        help="the memory a kernel can write to on the CPU (default: %(default)s; it caps RLIMIT_DATA, "
                             "not the address space; GPU memory is not capped)")
    parser.add_argument("--max-processes", type=int, default=defaults.max_processes, metavar="N",
                        help="the processes and threads a kernel may run")
    parser.add_argument("--max-file-mb", type=int, default=defaults.max_file_mb, metavar="MB",
                        help="the largest file a kernel may write")
    parser.add_argument("--output-cap-kb", type=int, default=defaults.output_cap_kb, metavar="KB",
                        help="the output kept from one cell; the rest is cut off")
    parser.add_argument("--no-cache", action="store_true", help="grade everything again")
    parser.add_argument("--exam", action="store_true",
                        help="submissions of an exam release: score each exercise on its public cases "
                             "(the check learners saw) and on hidden ones (the practice check), "
                             "one gradebook column each")
    parser.add_argument("--lms", choices=("canvas",),
                        help="also write the LMS's gradebook import file (canvas: canvas.csv)")
    add_canvas_options(parser)
    parser.add_argument("--regrade", type=Path, metavar="PREVIOUS_RESULTS",
                        help="grade again into --out and report, per learner, what changed since "
                             "PREVIOUS_RESULTS and why (regrade.html); PREVIOUS_RESULTS is kept as it is")
    parser.add_argument("--reveal-hidden", action="store_true",
                        help="with --exam: feedback pages say what the hidden cases found (their "
                             "inputs included), not only passed or failed")
    parser.add_argument("--hints", choices=("none", "first", "all"),
                        help="with --exam: the --hints the exam release was made with (default: none); "
                             "the public checks' messages then show no hint or error note it withheld")
    parser.add_argument("--hide", type=Path, action="append", default=[], metavar="FOLDER",
                        help="a folder the submissions must not see, emptied in the sandbox like the "
                             "submissions and --out are (repeatable): on a shared file system, the folder "
                             "that holds every shard's results, and anything else with other learners' data")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade WITHOUT the bubblewrap sandbox: submissions can then read and change "
                             "your files and use the network. Only for submissions you trust.")
    args = parser.parse_args(argv)

    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    try:  # first of all: nothing is read, run or written without a sandbox unless asked
        sandbox = choose_sandbox(args.no_sandbox)
    except SandboxUnavailable as refusal:
        print(refusal, file=sys.stderr)
        return 2
    limits = Limits(args.cell_timeout, args.notebook_timeout, args.memory_mb, args.max_processes,
                    args.max_file_mb, args.output_cap_kb)
    if args.reveal_hidden and not args.exam:
        parser.error("--reveal-hidden goes with --exam")
    if args.hints is not None and not args.exam:
        parser.error("--hints goes with --exam")
    if args.regrade is not None and args.regrade.resolve() == args.out.resolve():
        parser.error("--regrade keeps the previous results: give a new --out folder")
    canvas_problem = canvas_option_problem(args)
    if canvas_problem:
        parser.error(canvas_problem)
    batch = Batch(args.course.resolve(), args.submissions.resolve(), args.out.resolve(), limits,
                  not args.no_cache, args.no_sandbox, args.exam, args.reveal_hidden,
                  tuple(path.resolve() for path in args.hide), hints=args.hints or "none")
    everyone = discover(batch.submissions)
    learners = [l for l in everyone if in_shard(l.id, args.shard)]
    clashing = sorted({l.id for l in learners} & REPORT_NAMES)
    if clashing:
        parser.error(f"a learner is named {', '.join(clashing)}, as a report in the results folder "
                     "is: rename that submission")
    problem = folder_problem(batch.out, args.shard)
    if problem:  # its gradebook would list another run's learners, and merge would mix them up
        print(f"Refusing to grade: {problem}", file=sys.stderr)
        return 2
    # One maximum for every learner, in every shard: the chapters the whole class handed in.
    batch.assignment = assignment_of(everyone, course_notebooks(batch.course), batch.exam)
    record = shard_record(args.shard, [l.id for l in learners], [l.id for l in everyone], batch.assignment)
    batch.out.mkdir(parents=True, exist_ok=True)
    write_shard_record(batch.out, record)  # before any result: a stopped run says what it lacks
    print(f"Grading {len(learners)} learners with {args.workers} workers; sandbox: {sandbox}")
    if sandbox != SANDBOXED:
        print("WARNING: not sandboxed (--no-sandbox). Submissions run with limits only: they can "
              "read and change your files and use the network.", file=sys.stderr)
    start = time.perf_counter()
    done = []

    def tell(line: str) -> None:
        done.append(line)
        print(line, flush=True)

    try:
        results, cached = run_batch(batch, learners, args.workers, tell, sandbox)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (batch.GradingStopped): workers and kernels are ended
        print(stopped_message(len(done), len(learners), batch.out, args.no_cache), flush=True)
        return 130
    write_shard_record(batch.out, {**record, "finished": True})
    # This run's learners only: the folder may hold results an earlier run wrote there.
    everything = read_results(batch.out, [l.id for l in learners])
    gradebook = write_gradebook(batch.out, everything, exercise_columns(everything))
    report = write_class_report(batch.out, everything)
    if args.lms:
        try:
            for note in write_lms(batch.out, everything, args.lms, canvas_options(args)).notes:
                print(f"canvas.csv: {note}")
        except CanvasProblem as problem:
            print(f"canvas.csv not written: {problem}", file=sys.stderr)
    print(f"Done in {time.perf_counter() - start:.1f} s: {len(results) - cached} graded, "
          f"{cached} from the cache; gradebook: {gradebook}; class report: {report}")
    if args.regrade is not None:
        regrade = write_regrade(args.regrade, batch.out)
        print(f"Regrade: {headline(regrade)} since {args.regrade}; see {batch.out / 'regrade.html'}")
        for item in regrade["learners"]:
            if item["status"] == CHANGED:
                print(f"  {learner_line(item)}")
    return 0


def stopped_message(graded: int, learners: int, out: Path, no_cache: bool) -> str:
    """What the console says when grading was stopped: what is kept and how to go on."""
    said = (f"Grading stopped: every worker and kernel ended. {graded} of {counted(learners, 'learner')} "
            f"graded; their results are in {out}. ")
    if not no_cache:
        return said + ("Run the same command again to grade the rest (the learners graded come from the "
                       "cache, except any that hit a time or memory limit).")
    return said + ("To grade only the rest, run the same command without --no-cache: this run removed its "
                   "learners' earlier cache entries as it started, so the cache now holds only what this run "
                   f"graded. Run again with --no-cache, it grades all {learners} again.")


if __name__ == "__main__":
    sys.exit(main())
