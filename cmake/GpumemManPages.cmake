# cmake -DGPUMEM=<gpumem> [-DGPUMEM_GUI=<gpumem-gui>] -DHELP2MAN=<help2man> -DOUT=<dir> -P GpumemManPages.cmake
# Writes OUT/gpumem.1.gz (from `gpumem --help`), OUT/gpumem-VERB.1.gz for every verb (from
# `gpumem help VERB`; the verbs come from `gpumem __complete ''`, so a new verb gets its page) and
# OUT/gpumem-gui.1.gz (from `gpumem-gui --help`). Fails on any help2man error.
cmake_minimum_required(VERSION 3.25)
foreach(var GPUMEM HELP2MAN OUT)
  if(NOT ${var})
    message(FATAL_ERROR "GpumemManPages.cmake: -D${var}= is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT} ${OUT}/wrappers)

function(run_checked)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "GpumemManPages.cmake: '${ARGN}' failed (${rc}): ${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# help2man NAME PROGRAM DESCRIPTION [help2man options…] → OUT/NAME.1.gz
function(man_page name program description)
  run_checked(${HELP2MAN} --no-info --section=1 "--name=${description}" "--output=${OUT}/${name}.1" ${ARGN} ${program})
  run_checked(gzip -9nf ${OUT}/${name}.1)
endfunction()

run_checked(${GPUMEM} help)
set(overview "${run_output}")
run_checked(${GPUMEM} --version)
if(NOT run_output MATCHES "^gpumem ([^\n]+)")
  message(FATAL_ERROR "GpumemManPages.cmake: 'gpumem --version' printed '${run_output}'")
endif()
set(version "${CMAKE_MATCH_1}")
run_checked(${GPUMEM} __complete "")
string(REPLACE "\n" ";" verbs "${run_output}")
list(REMOVE_ITEM verbs "" help)

# help2man runs PROGRAM --help and PROGRAM --version. A wrapper per page answers --help with gpumem's
# help text, its usage block reshaped the way help2man reads a SYNOPSIS ("Usage: …" and "  or:  …"
# lines, continuation lines joined; the overview's title line before it left out, the NAME says it),
# and --version with `gpumem --version`.
file(WRITE ${OUT}/wrappers/usage.awk [=[
!started && /^usage:/ { sub(/^usage:/, "Usage:"); line = $0; started = 1; next }
!started { next }
!done && /^ +gpumem / { print line; sub(/^ +/, ""); line = "  or:  " $0; next }
!done && /^ +[^ ]/ { sub(/^ +/, " "); line = line $0; next }
!done { print line; done = 1 }
{ print }
END { if (!done) print line }
]=])
function(wrapper name help_command)
  set(path ${OUT}/wrappers/${name})
  file(WRITE ${path} "#!/bin/sh\nif [ \"$1\" = --version ]; then exec '${GPUMEM}' --version; fi\n"
    "'${GPUMEM}' ${help_command} | awk -f '${OUT}/wrappers/usage.awk'\n")
  file(CHMOD ${path} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()

set(see_also "")
foreach(verb IN LISTS verbs)
  # The verb's summary: its line in `gpumem help` ("  info      summarize …").
  if(NOT overview MATCHES "\n  ${verb} +([^\n]*)")
    message(FATAL_ERROR "GpumemManPages.cmake: '${verb}' is not in the verb list of 'gpumem help'")
  endif()
  set(summary "${CMAKE_MATCH_1}")
  wrapper(gpumem-${verb} "help ${verb}")
  man_page(gpumem-${verb} ${OUT}/wrappers/gpumem-${verb} "${summary}" "--version-string=${version}")
  string(APPEND see_also ".BR gpumem-${verb} (1),\n")
endforeach()
if(GPUMEM_GUI)
  man_page(gpumem-gui ${GPUMEM_GUI} "the gpumem viewer: GPU memory traces, fragmentation and allocator what-ifs")
  string(APPEND see_also ".BR gpumem-gui (1),\n")
endif()
string(REGEX REPLACE ",\n$" "\n" see_also "${see_also}")
file(WRITE ${OUT}/wrappers/see-also.h2m "[SEE ALSO]\n${see_also}\nREADME.md and docs/ in share/doc/gpumem of the installation (/usr/share/doc/gpumem from the .deb).\n")
wrapper(gpumem --help)
man_page(gpumem ${OUT}/wrappers/gpumem "offline GPU memory-trace analyzer and allocator simulator"
  "--version-string=${version}" --include=${OUT}/wrappers/see-also.h2m)
file(REMOVE_RECURSE ${OUT}/wrappers)
