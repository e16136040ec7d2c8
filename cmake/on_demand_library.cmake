# on_demand_library(TARGET PREFIX NAME): TARGET calls the library that
# pkg_check_modules(PREFIX ...) found through shims (*_on_demand.cpp) that open it when first
# used (symbols/util/lazy_library.h), so it is not linked: TARGET gets the library's headers
# and its file name to open (its SONAME) as BPFPROF_<NAME>_SONAME.
function(on_demand_library target prefix name)
  list(GET ${prefix}_LINK_LIBRARIES 0 library)
  find_program(BPFPROF_READELF NAMES readelf REQUIRED)
  execute_process(COMMAND ${BPFPROF_READELF} -d ${library}
                  OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
  string(REGEX MATCH "Library soname: \\[([^]]+)\\]" found "${dynamic}")
  if(NOT status EQUAL 0 OR NOT found)
    message(FATAL_ERROR "cannot read the SONAME of ${library} (${prefix})")
  endif()
  target_include_directories(${target} PUBLIC ${${prefix}_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE BPFPROF_${name}_SONAME="${CMAKE_MATCH_1}")
  target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
endfunction()
