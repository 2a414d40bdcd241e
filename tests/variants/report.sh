# tests/variants/report.sh — reading weft-info's plugin load report, sourced
# by the variant scripts.  A row is a path line, "  STATUS PATH" with STATUS
# one of loaded, skipped, unsupported, failed, then its details on the
# lines below ("name=cpu variant=avx2 ... score=20 chosen=yes", maybe a
# reason).  A reason can name another row's file ("a better variant was
# chosen: .../libweft-cpu-avx512.so"), so rows are found by their path
# line, never by grepping for a file name, and never by their order (the
# loader may report candidates in any order).

# The report on stdin as one line per row: STATUS, PATH and the details
# line, separated by tabs.
report_rows() {
    awk '
        /^  (loaded|skipped|unsupported|failed) +[^ ]/ {
            status = $1
            path = $0
            sub(/^  [a-z]+ +/, "", path)
            details = ""
            if ((getline line) > 0) {
                details = line
                sub(/^ +/, "", details)
            }
            printf "%s\t%s\t%s\n", status, path, details
        }'
}

# The row (as report_rows prints it) whose path is the file named $1
# (a base name such as libweft-cpu-avx512.so), from the report on stdin.
report_row_of_file() {
    report_rows | awk -F '\t' -v file="$1" '{
        n = split($2, parts, "/")
        if (parts[n] == file) { print; exit }
    }'
}

# The row of plugin $1's variant $2, from the report on stdin.
report_row_of_variant() {
    report_rows | awk -F '\t' -v want="name=$1 variant=$2 " 'index($3, want) == 1 { print; exit }'
}

# The score in a row (as report_rows prints it) on stdin, or nothing.
row_score() {
    sed -n 's/.* score=\(-*[0-9][0-9]*\) .*/\1/p'
}

# Whether the row on stdin has status $1 and details matching the extended
# regular expression $2.
row_is() {
    awk -F '\t' -v status="$1" -v pattern="$2" '
        { found = $1 == status && $3 ~ pattern } END { exit !found }'
}
