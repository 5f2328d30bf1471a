# Run at build time (cmake -DSRC=<source dir> -DOUT=<header> -P flash_kda_commit.cmake, by the
# flash_kda_commit target of CMakeLists.txt): writes OUT, defining FLASH_KDA_GIT_COMMIT as the source
# tree's commit (`git rev-parse --short=12 HEAD`), followed by "-dirty" when tracked files differ from
# it, or "unknown" without git or where SRC is not the top of its git work tree (a copy vendored into
# another repository would otherwise name that repository's commit). OUT is rewritten only when its text
# changes, so a build at an unchanged commit recompiles nothing, and kda_version_string() never names a
# commit the library was not built from.
execute_process(COMMAND git rev-parse --show-toplevel WORKING_DIRECTORY "${SRC}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(commit "")
if(rc EQUAL 0 AND top)
  get_filename_component(top_real "${top}" REALPATH)
  get_filename_component(src_real "${SRC}" REALPATH)
  if(top_real STREQUAL src_real)
    execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SRC}" RESULT_VARIABLE rc
                    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT rc EQUAL 0)
      set(commit "")
    endif()
  endif()
endif()
if(NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY "${SRC}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE changes ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT changes STREQUAL "")
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/flash_kda_commit.cmake; not a source file.\n#define FLASH_KDA_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
